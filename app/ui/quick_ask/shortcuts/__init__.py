"""The global shortcut that opens quick ask: Windows RegisterHotKey, an X11 key grab, the Wayland portal."""
