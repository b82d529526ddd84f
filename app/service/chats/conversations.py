"""The saved chats: create, read, rename, delete, search, and what a new chat starts with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from app.core.answer_stats import AnswerStats
from app.core.attachments import MAX_IMAGES, AttachedImage
from app.core.conversation import Conversation, Message, Role
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryError, HistoryStore
from app.library.installed import InstalledModel
from app.service.chats.drafts import DraftBook
from app.service.events import ConversationChanged, ConversationRemoved, Event, Problem
from app.service.settings_keeper import SettingsKeeper
from app.service.storage import Storage

T = TypeVar("T")


class Conversations:
    """Every chat in the history, for any front end; none of it is about the chat on screen.

    Reads and writes run on the storage's writer thread. ConversationChanged and
    ConversationRemoved tell front ends (and the open chat) what changed. A new chat
    takes the defaults of `defaults_model()` (the app's model) over the app's settings.
    `drafts` holds each chat's unsent text (kept in the history with it).
    """

    def __init__(self, storage: Callable[[], Storage], emit: Callable[[Event], None], keeper: SettingsKeeper,
                 drafts: DraftBook, defaults_model: Callable[[], InstalledModel | None]) -> None:
        self._storage = storage
        self._emit = emit
        self.drafts = drafts
        self._keeper = keeper
        self._defaults_model = defaults_model

    # --- a new chat's defaults ---------------------------------------------------------

    def new_chat_system_prompt(self) -> str:
        model = self._defaults_model()
        own = model.defaults.system_prompt if model is not None else None
        return own or ""

    def new_chat_settings(self) -> GenerationSettings:
        """A new chat's settings: the app model's own defaults over the app's."""
        model = self._defaults_model()
        if model is None:
            return self._keeper.settings.generation
        return model.defaults.generation(self._keeper.settings.generation)

    # --- reading -----------------------------------------------------------------------

    async def listing(self) -> list[Conversation]:
        """Every chat, newest first; [] (and a Problem) if the history cannot be read."""
        return await self.or_problem(HistoryStore.list_conversations) or []

    async def read_all(self) -> list[Conversation]:
        """Every chat, newest first; HistoryError for the caller to say."""
        return await self._storage().history(HistoryStore.list_conversations)

    async def get(self, conversation_id: int) -> Conversation:
        """One chat; KeyError if there is none, HistoryError if the disk failed."""
        return await self._storage().history(HistoryStore.get_conversation, conversation_id)

    async def messages(self, conversation_id: int) -> list[Message]:
        return await self._storage().history(HistoryStore.messages, conversation_id)

    async def search(self, query: str) -> set[int] | None:
        """The ids of the chats whose title or messages contain query (None: no filter)."""
        query = query.strip()
        if not query:
            return None
        found = await self.or_problem(HistoryStore.search_conversations, query)
        return {c.id for c in found} if found is not None else None

    async def recover_interrupted(self) -> int:
        """Answers cut off when Kestrel last closed are marked so; how many there were."""
        return await self.or_problem(HistoryStore.recover_interrupted) or 0

    # --- changing ----------------------------------------------------------------------

    async def create(self, title: str, model_id: str | None) -> Conversation:
        """Save a new chat with the new-chat defaults (model_id: its own model, or None)."""
        conversation = await self._storage().history(
            HistoryStore.create_conversation, title=title, system_prompt=self.new_chat_system_prompt(),
            settings=self.new_chat_settings(), model=model_id)
        self._emit(ConversationChanged(conversation))
        return conversation

    async def keep_exchange(self, title: str, turns: Sequence[tuple[Role, str]], answer: str,
                            stats: AnswerStats, model_id: str,
                            images: Mapping[int, Sequence[AttachedImage]] | None = None) -> Conversation | None:
        """Save an exchange that happened elsewhere (an API request) as a chat of its own: its
        system prompt, user and assistant turns and the answer; None (said) if the disk refused.
        images: each user turn's images (checked already), by the turn's index in `turns`; a
        turn keeps at most MAX_IMAGES, and its text says how many more there were."""
        system = "\n\n".join(text for role, text in turns if role == Role.SYSTEM)
        given = images or {}

        def write(store: HistoryStore) -> Conversation:
            with store.transaction():
                made = store.create_conversation(title=title, system_prompt=system,
                                                 settings=self.new_chat_settings(), model=model_id)
                for number, (role, text) in enumerate(turns):
                    pictures = given.get(number, ()) if role == Role.USER else ()
                    if role in (Role.USER, Role.ASSISTANT) and (text or pictures):
                        kept_text, kept_images = _kept(text, pictures)
                        store.add_message(made.id, role, kept_text, images=kept_images)
                store.add_message(made.id, Role.ASSISTANT, answer, stats=stats)
            return store.get_conversation(made.id)

        conversation = await self.or_problem(write)
        if conversation is not None:
            self._emit(ConversationChanged(conversation))
        return conversation

    async def refresh(self, conversation_id: int, *, to_top: bool = True) -> Conversation:
        """Read a chat again and tell everyone its new form."""
        conversation = await self.get(conversation_id)
        self._emit(ConversationChanged(conversation, to_top=to_top))
        return conversation

    async def rename(self, conversation_id: int, title: str) -> bool:
        """Give a chat a new title; its place in the list stays."""
        title = title.strip()
        if not title:
            return False
        try:
            await self._storage().history(HistoryStore.rename_conversation, conversation_id, title)
            await self.refresh(conversation_id, to_top=False)
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return False
        return True

    async def name_by_first_message(self, conversation_id: int, title: str) -> None:
        """A chat made before its first message takes its title from it (not said: the
        message's save refreshes the chat)."""
        await self._storage().history(HistoryStore.rename_conversation, conversation_id, title)

    async def delete(self, conversation_id: int) -> bool:
        """Delete a chat, its messages and its draft (a chat already gone counts as deleted)."""
        try:
            await self._storage().history(HistoryStore.delete_conversation, conversation_id)
        except KeyError:
            pass  # deleted already (a second click): gone is what was asked
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return False
        self.drafts.forget(conversation_id)
        self._emit(ConversationRemoved(conversation_id))
        return True

    async def update(self, conversation_id: int, system_prompt: str, settings: GenerationSettings) -> None:
        """A chat's own system prompt and settings (HistoryError for the caller to say)."""
        await self._storage().history(HistoryStore.update_conversation, conversation_id,
                                      system_prompt=system_prompt, settings=settings)
        await self.refresh(conversation_id)

    async def choose_model(self, conversation_id: int, model_id: str | None) -> bool:
        """A chat's own model (None: the default); False (said) if it could not be saved."""
        try:
            await self._storage().history(HistoryStore.choose_model, conversation_id, model_id)
            await self.refresh(conversation_id, to_top=False)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That chat is gone.", "history"))
            return False
        return True

    async def or_problem(self, method: Callable[..., T], *args: Any) -> T | None:
        """One history call; a problem with the user's disk is shown, not raised (None)."""
        try:
            return await self._storage().history(method, *args)
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return None


def _kept(text: str, images: Sequence[AttachedImage]) -> tuple[str, tuple[AttachedImage, ...]]:
    """A turn's text and images as a chat keeps them: a request may send more images in one turn
    (16) than a message keeps (MAX_IMAGES); the first are kept and the text says how many were not."""
    if len(images) <= MAX_IMAGES:
        return text, tuple(images)
    left = len(images) - MAX_IMAGES
    note = (f"({left} more image{'s were' if left != 1 else ' was'} sent with this message and not kept: "
            f"a chat keeps at most {MAX_IMAGES} images a message.)")
    return f"{text}\n\n{note}" if text else note, tuple(images[:MAX_IMAGES])
