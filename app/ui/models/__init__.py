"""The model manager: installed models and the catalog as cards, downloads, Hugging Face, fit, hardware, first run."""
