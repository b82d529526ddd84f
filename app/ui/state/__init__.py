"""The service's state as Qt: the adapter's signals, the item models every view reads, and their words."""
