"""PyWinRT's winrt.windows.foundation: the asynchronous operation the other namespaces hand back."""

from winrt._fake import Operation as IAsyncOperation

__all__ = ["IAsyncOperation"]
