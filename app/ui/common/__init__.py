"""What every part of the window shares: the theme, the icons, the style, dialogs that sit right, collection."""
