"""Kestrel: an offline AI assistant for the desktop."""

import os

__version__ = "0.1.0"

# Nothing the user types leaves the machine, and neither does anything about it: ONNX
# Runtime and ONNX Runtime GenAI carry Microsoft's 1DS telemetry uploader, which looks up
# mobile.events.data.microsoft.com a few seconds after the import and keeps a device ID
# and an event store under ~/.cache/Microsoft (in the registry on Windows). The variable
# must be set before either library is imported; every Kestrel process (the window, the
# engine child, the CLI, the frozen app) imports this package first, and children inherit
# it. Set unconditionally: no setting of the user's turns it back on.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
