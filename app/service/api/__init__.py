"""The API server's door into the service: its answers on the shared engine line, their context, images and types."""
