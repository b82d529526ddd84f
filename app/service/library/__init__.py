"""The model manager's service: the library's rows and fit, downloads, Hugging Face search, the recommendation, hardware."""
