"""Each front end's door into the service: the few calls and values one front end (or one part of the window) uses."""
