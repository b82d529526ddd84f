"""'Add a server…': a name, an address, a kind and an optional key (another Kestrel's pairing code), checked and found only when the person presses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import (QComboBox, QDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QSizePolicy, QVBoxLayout, QWidget)

from app.library.servers.book import ServerAdded
from app.library.servers.faults import ServerFault
from app.library.servers.finding import FoundServer
from app.library.servers.link_pairing import PairingRefused
from app.library.servers.records import RemoteModel, ServerKind
from app.library.servers.server_list import ServerListError

if TYPE_CHECKING:
    from app.service.doors.servers import ServersDoor

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]

# The kinds in the order offered, with what the person reads.
KIND_WORDS: tuple[tuple[ServerKind, str], ...] = (
    (ServerKind.OPENAI, "OpenAI-compatible (LM Studio, llama-server, vLLM, Jan)"),
    (ServerKind.OLLAMA, "Ollama"),
    (ServerKind.KESTREL, "Another Kestrel (its API server)"),
    (ServerKind.ANTHROPIC, "Anthropic-compatible (its Messages API)"),
)
KEY_HINT = ("Only if the server asks for one. Kestrel keeps it in your system's credential store (without "
            "one, in a file only you can read) and never shows it again.")
# Where the person finds the key for a kind that always has one.
KEY_WHERE = {ServerKind.KESTREL: " Another Kestrel's key is in its View → API server… window."}
CODE_HINT = ("Kestrel Link: on the other PC, turn on “Share models with other computers” in View → API server…, "
             "then type the https:// address and the pairing code it shows. Kestrel checks the code against that "
             "PC's certificate before sending it, and pins the certificate. Without a code, give its API key.")
KESTREL_ADDRESS = "https://192.168.1.20:8766"
WHERE_IT_LOOKS = "Ollama (port 11434), LM Studio (1234), llama-server (8080) and Foundry Local on this PC"


def models_words(name: str, models: tuple[RemoteModel, ...]) -> str:
    """What a server that answered offers, in a sentence."""
    if not models:
        return f"{name} answered, but lists no models. Load one there, then check again."
    names = ", ".join(model.name for model in models[:5])
    more = f" and {len(models) - 5} more" if len(models) > 5 else ""
    return f"{name} answered: {len(models)} model{'s' if len(models) != 1 else ''} ({names}{more})."


class AddServerDialog(QDialog):
    """The form, Check, Add and "Find servers on this PC". Nothing is contacted until a button is pressed;
    every call runs on the service's loop through the ServersDoor (`spawn`), and its words land in `note`.

    Add checks first: a server that answers is added at once; one that does not keeps the form as typed,
    shows the server's words and turns Add into "Add anyway" (a PC that is off now may be on later).
    Signals: serverAdded(ServerAdded, models or None when it was added unchecked).
    """

    serverAdded = Signal(object, object)

    def __init__(self, servers: ServersDoor, spawn: Spawn, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a server")
        self._servers = servers
        self._spawn = spawn
        self._task: asyncio.Task[Any] | None = None
        self._failed: tuple[str, str, ServerKind] | None = None  # what was checked and did not answer
        self.found: list[FoundServer] = []
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("studio-pc")
        self.name.setAccessibleName("Name")
        self.url = QLineEdit(self)
        self.url.setPlaceholderText("http://192.168.1.20:11434")
        self.url.setAccessibleName("Address")
        self.kind = QComboBox(self)
        self.kind.setAccessibleName("Kind")
        for kind, words in KIND_WORDS:
            self.kind.addItem(words, kind)
        self.key = QLineEdit(self)
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setAccessibleName("Key")
        self.key.setPlaceholderText("none")
        self.key_hint = self._wrapped(KEY_HINT, "serverKeyHint")
        self.code = QLineEdit(self)
        self.code.setAccessibleName("Pairing code")
        self.code.setPlaceholderText("XXXX-XXXX-XXXX")
        self.code_hint = self._wrapped(CODE_HINT, "serverCodeHint")
        self.found_choice = QComboBox(self)
        self.found_choice.setAccessibleName("Servers found on this PC")
        self.found_choice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.found_choice.hide()
        self.note = self._wrapped("Nothing is contacted until you press Check, Add or Find.", "serverNote")
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.find_button = QPushButton("&Find servers on this PC", self)
        self.find_button.setToolTip(f"Looks once at {WHERE_IT_LOOKS}, and nowhere else.")
        self.find_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.check_button = QPushButton("C&heck", self)
        self.add_button = QPushButton("&Add", self)
        self.add_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", self)
        self._lay_out()
        for field in (self.name, self.url, self.key, self.code):
            field.textChanged.connect(self._edited)
        self.kind.currentIndexChanged.connect(self._edited)
        self.found_choice.activated.connect(self._fill_found)
        self.find_button.clicked.connect(self.find_on_this_pc)
        self.check_button.clicked.connect(self.check)
        self.add_button.clicked.connect(self.add)
        self.cancel_button.clicked.connect(self.reject)
        self._edited()

    def _wrapped(self, text: str, name: str) -> QLabel:
        label = QLabel(text, self)
        label.setObjectName(name)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        return label

    def _lay_out(self) -> None:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("&Name:", self.name)
        form.addRow("Add&ress:", self.url)
        form.addRow("&Kind:", self.kind)
        form.addRow("Pairing &code:", self.code)
        form.addRow("K&ey:", self.key)
        self._form = form
        finding = QHBoxLayout()
        finding.addWidget(self.find_button)
        finding.addWidget(self.found_choice, 1)
        finding.addStretch(0)  # the button keeps its size while nothing was found
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.check_button)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addLayout(finding)
        layout.addLayout(form)
        layout.addWidget(self.code_hint)
        layout.addWidget(self.key_hint)
        layout.addWidget(self.note)
        layout.addStretch(1)
        layout.addLayout(buttons)
        # Room for an address and the kinds' words on one line; the notes wrap below them.
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(KIND_WORDS[0][1]) * 3 // 2)

    # --- what the form says ---------------------------------------------------------------

    def chosen_kind(self) -> ServerKind:
        return ServerKind(self.kind.currentData())

    def set_kind(self, kind: ServerKind) -> None:
        self.kind.setCurrentIndex(self.kind.findData(kind))

    def typed(self) -> tuple[str, str, ServerKind]:
        """Name, address and kind as typed; a name left empty is the address's host, as people call a PC."""
        url = self.url.text().strip()
        name = self.name.text().strip()
        if not name and url:
            name = urlsplit(url if "://" in url else "http://" + url).hostname or ""
        return name, url, self.chosen_kind()

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def pairing(self) -> bool:
        """Another Kestrel with a pairing code typed: Add pairs (Kestrel Link) instead of keeping a key."""
        return self.chosen_kind() == ServerKind.KESTREL and bool(self.code.text().strip())

    def _edited(self) -> None:
        kestrel = self.chosen_kind() == ServerKind.KESTREL
        self._form.setRowVisible(self.code, kestrel)
        self.code_hint.setVisible(kestrel)
        self.url.setPlaceholderText(KESTREL_ADDRESS if kestrel else "http://192.168.1.20:11434")
        self.key_hint.setText(KEY_HINT + KEY_WHERE.get(self.chosen_kind(), ""))
        if self.isVisible():
            self.fit_height()
        if self._failed is not None and self._failed != self.typed():
            self._failed = None  # what failed is no longer what the form says: Add checks again
        self._enable()

    def _enable(self) -> None:
        idle = not self.busy
        ready = bool(self.url.text().strip())
        self.find_button.setEnabled(idle)
        self.check_button.setEnabled(idle and ready and not self.pairing)  # a code is used once: Add pairs
        self.add_button.setEnabled(idle and ready)
        self.add_button.setText("&Pair and add" if self.pairing else "&Add anyway" if self._failed is not None
                                else "&Add")
        for field in (self.name, self.url, self.kind, self.key, self.code, self.found_choice):
            field.setEnabled(idle)
        self.key.setEnabled(idle and not self.pairing)  # pairing gives the key

    def _say(self, text: str) -> None:
        self.note.setText(text)
        self.fit_height()

    def fit_height(self) -> None:
        """Grow to the height the form needs at this width: the wrapped notes' lines (and the pairing code's
        row, for another Kestrel) would otherwise squash the fields above them."""
        layout = self.layout()
        if layout is None:
            return
        layout.activate()
        needed = layout.totalHeightForWidth(self.width()) if layout.hasHeightForWidth() else 0
        if self.height() < needed:
            self.resize(self.width(), needed)

    def showEvent(self, event: QShowEvent) -> None:  # Override QDialog.showEvent.
        super().showEvent(event)
        self.fit_height()

    # --- the presses ----------------------------------------------------------------------

    def _run(self, work: Coroutine[Any, Any, None]) -> None:
        self._task = self._spawn(work)
        self._enable()
        self._task.add_done_callback(lambda _done: self._enable() if shiboken6.isValid(self) else None)

    def find_on_this_pc(self) -> None:
        """Look at this PC's usual ports, once; fill the form from the first server that answered."""
        if self.busy:
            return
        self._say(f"Looking at {WHERE_IT_LOOKS}…")
        self._run(self._find())

    async def _find(self) -> None:
        found = await self._servers.find_on_this_pc()
        if not shiboken6.isValid(self):
            return
        self.found = found
        self.found_choice.clear()
        for server in found:
            self.found_choice.addItem(f"{server.program} at {server.url}")
        self.found_choice.setVisible(len(found) > 1)
        if not found:
            self._say(f"Nothing answered: no server of {WHERE_IT_LOOKS} is running. Start one, or type the "
                      "address of a server on another computer.")
            return
        self._fill_found(0)
        others = f" (and {len(found) - 1} more: choose beside the button)" if len(found) > 1 else ""
        self._say(f"Found {found[0].program} at {found[0].url}{others}. Press Add to add it.")

    def _fill_found(self, index: int) -> None:
        if 0 <= index < len(self.found):
            server = self.found[index]
            self.name.setText(server.name)
            self.url.setText(server.url)
            self.set_kind(server.kind)

    def check(self) -> None:
        """Ask the server typed for its models, keeping nothing."""
        if not self.busy:
            self._run(self._check(add=False))

    def add(self) -> None:
        """Check, then add when it answered; after a failed check of the same form, add anyway."""
        if self.busy:
            return
        if self.pairing:
            self._run(self._pair())
        elif self._failed is not None and self._failed == self.typed():
            self._run(self._add(None))
        else:
            self._run(self._check(add=True))

    async def _check(self, *, add: bool) -> None:
        name, url, kind = self.typed()
        self._say(f"Asking {url} for its models…")
        try:
            models = await self._servers.check(name, url, kind, self.key.text() or None)
        except (ValueError, ServerFault) as refused:
            if shiboken6.isValid(self):
                self._failed = (name, url, kind) if isinstance(refused, ServerFault) else None
                more = " You can add it anyway: it is asked again when you choose one of its models." \
                    if add and self._failed is not None else ""
                self._say(str(refused) + more)
            return
        if not shiboken6.isValid(self):
            return
        self._failed = None
        if add:
            await self._add(models)
        else:
            self._say(models_words(name, models) + " Press Add to add it.")

    async def _add(self, models: tuple[RemoteModel, ...] | None) -> None:
        name, url, kind = self.typed()
        try:
            added: ServerAdded = await self._servers.add(name, url, kind, self.key.text() or None)
        except (ValueError, ServerListError, OSError) as refused:
            if shiboken6.isValid(self):
                self._say(f"{name} was not added: {refused}" if isinstance(refused, OSError) else str(refused))
            return
        if not shiboken6.isValid(self):
            return
        self.key.clear()  # kept where the words say; never shown again
        self._task = None  # done: accept() must not cancel the call that is ending now
        self.serverAdded.emit(added, models)
        self.accept()

    async def _pair(self) -> None:
        """Kestrel Link: pair with the code, then list the models (a failure to list is said by the panel)."""
        name, url, _kind = self.typed()
        self._say(f"Pairing with {url}…")
        try:
            added: ServerAdded = await self._servers.pair(name, url, self.code.text())
        except (ValueError, PairingRefused, ServerListError, OSError) as refused:
            if shiboken6.isValid(self):
                self._say(f"{name} was not added: {refused}" if isinstance(refused, OSError) else str(refused))
            return
        try:
            models: tuple[RemoteModel, ...] | None = await self._servers.models(added.server.name)
        except ServerFault:
            models = None
        if not shiboken6.isValid(self):
            return
        self.code.clear()
        self._task = None  # done: accept() must not cancel the call that is ending now
        self.serverAdded.emit(added, models)
        self.accept()

    def closeEvent(self, event: QCloseEvent) -> None:  # Override QDialog.closeEvent.
        self.key.clear()
        super().closeEvent(event)

    def done(self, result: int) -> None:  # Override QDialog.done.
        # The key leaves the form with the dialog, and a check still under way adds nothing after Cancel.
        self.key.clear()
        if self.busy and self._task is not None:
            self._task.cancel()
        super().done(result)
