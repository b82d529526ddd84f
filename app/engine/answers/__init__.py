"""What every backend shares to stream an answer: the prompt fitted to the context, the text, the thinking, the shape."""
