"""Downloading a model unit over HTTP(S): resumable, verified, all or nothing. Plain Python, no Qt.

Nothing here opens a socket until UnitDownload.run() is called.
"""

from app.library.download.control import DownloadControl
from app.library.download.errors import DownloadError, DownloadErrorKind, DownloadStopped
from app.library.download.part import DownloadedFile
from app.library.download.progress import DownloadProgress, ProgressCallback
from app.library.download.transport import RemoteFacts, probe
from app.library.download.unit import DownloadOptions, FileSpec, UnitDownload

__all__ = ["DownloadControl", "DownloadError", "DownloadErrorKind", "DownloadOptions",
           "DownloadProgress", "DownloadStopped", "DownloadedFile", "FileSpec",
           "ProgressCallback", "RemoteFacts", "UnitDownload", "probe"]
