"""QuickAskDoor: the quick-ask window's exchange, the model it waits for, and its screenshots' check."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from app.service.documents.attached_images import read_image_data
from app.service.events import ModelState
from app.service.models.background import AppWindow

if TYPE_CHECKING:
    from app.service.root import Service


class QuickAskDoor:
    """What the quick-ask window calls: `ask(text, images)` in its exchange (a chat of its own, not
    the main window's open chat), `stop`, `new_exchange`, `end` (closed for good), `hand_over`
    ("Continue in Kestrel": the chat id to open there), `questions()` (the exchange's, as saved),
    `take_returned` (a question that could not be saved), `vision()` (whether the app's model sees
    a screenshot), `read_image_data` (a screenshot's PNG checked off the loop, as a pasted image
    is), `answer_tool(approval_id, decision)` (the person's word on a tool call of the exchange,
    heard as ToolApprovalAsked: the main window asks only about its open chat), and the model's
    state and words. The window hears the service's events (`subscribe`: the
    usual ones, carrying the exchange's conversation id) and runs its calls on the service's loop
    (`spawn`), as the main window does.

    The calls are QuickAsk's own (app/service/chats/quick_ask.py), and answer_tool ToolUse's (the
    one the main window's approval bar answers through), handed over as they are.
    """

    def __init__(self, service: Service) -> None:
        self._session = service.session
        self._keeper = service.keeper
        quick = self._quick = service.quick_ask
        self.ask = quick.ask
        self.stop = quick.stop
        self.new_exchange = quick.new_exchange
        self.end = quick.end
        self.hand_over = quick.hand_over
        self.take_returned = quick.take_returned
        self.questions = quick.questions
        self.vision = quick.vision
        self.read_image_data = read_image_data
        self.answer_tool = service.tools.answer
        self.subscribe = service.subscribe
        self.spawn = service.spawn
        # Where the quick-ask window is: the engine's pace follows the most awake of Kestrel's windows.
        self.set_window_state = functools.partial(service.set_window_state, window=AppWindow.QUICK_ASK)

    @property
    def conversation_id(self) -> int | None:
        """The exchange's chat: the window shows the answers of this one only."""
        return self._quick.conversation_id

    @property
    def busy(self) -> bool:
        return self._quick.busy

    @property
    def wrap_code(self) -> bool:
        """Whether code blocks wrap long lines (View → Wrap long code lines), as the main window draws them."""
        return self._keeper.settings.wrap_code

    @property
    def model_state(self) -> ModelState:
        return self._session.state

    @property
    def model_detail(self) -> str:
        """The status line's words for the model ("Loading Gemma 3 270M…", why it failed)."""
        return self._session.detail
