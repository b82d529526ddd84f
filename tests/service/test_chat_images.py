"""Images in a chat through the chat and attach doors on the scripted engine: checked, kept, sent to the engine on
their turn every time the chat is answered, and refused in words for a model that cannot see them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace as changed
from pathlib import Path

import pytest

from app.core.attachments import IMAGE_TOKENS, AttachedFile, AttachedImage, AttachedSection
from app.core.conversation import Conversation, Message, MessageState, Role
from app.core.generation import GenerationSettings
from app.service import events as ev
from app.service.chats.answer_run import chat_of
from app.documents.image_check import ImageInput, ImageResult, check_image
from app.engine.protocol import ChatMessage
from app.service.api.api_images import seen_images
from app.service.api.api_types import ApiAsk, ApiImage, ApiRefused
from app.service.documents.attached_images import PROMPT_IMAGES, UNSEEN, ImagesUnreadable, read_image_data, read_images
from app.service.documents.document_context import ChatDocuments, Fit
from app.service.chats.vision import NO_MODEL
from tests.helpers.images import image_bytes, write_image
from tests.service.conftest import give_sight, run, stored, take_sight

CHART = AttachedImage("chart.png", "image/png", 64, 48, image_bytes(64, 48), "")
PHOTO = AttachedImage("photo.jpg", "image/jpeg", 80, 60, image_bytes(80, 60, "JPEG"), "")


def user_turns(engine, request: int = -1) -> list[tuple[str, tuple[bytes, ...]]]:
    return [(m.content, m.images) for m in engine.requests[request].messages if m.role == Role.USER]


def test_images_reach_the_engine_on_their_turn_every_time_the_chat_is_answered(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            give_sight(service)
            assert doors.attach.vision().available and doors.attach.vision().reason == ""
            assert doors.chat.send("What is in these?", images=[CHART, PHOTO])
            await doors.chat.wait_idle()
            assert user_turns(engine) == [("What is in these?", (CHART.data, PHOTO.data))]
            user, answer = await stored(service, doors.chat.conversation.id)
            assert user.images == (CHART, PHOTO) and answer.images == () and answer.text
            assert doors.chat.messages[0].images == (CHART, PHOTO)
            assert doors.chat.send("And the colour?")
            await doors.chat.wait_idle()
            assert user_turns(engine) == [("What is in these?", (CHART.data, PHOTO.data)), ("And the colour?", ())]

    run(scenario)


def test_images_alone_ask_for_a_description_and_edit_and_regenerate_keep_them(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            give_sight(service)
            assert doors.chat.send("", images=[CHART])
            await doors.chat.wait_idle()
            assert doors.chat.messages[0].text == "Describe the attached image."
            assert doors.chat.regenerate()
            await doors.chat.wait_idle()
            assert user_turns(engine) == [("Describe the attached image.", (CHART.data,))]
            assert doors.chat.edit_and_resend(doors.chat.messages[0].id, "")
            await doors.chat.wait_idle()
            assert user_turns(engine) == [("Describe the attached image.", (CHART.data,))]
            assert doors.chat.edit_and_resend(doors.chat.messages[0].id, "Is it a bar chart?")
            await doors.chat.wait_idle()
            assert user_turns(engine) == [("Is it a bar chart?", (CHART.data,))]
            user, _ = await stored(service, doors.chat.conversation.id)
            assert user.images == (CHART,)

    run(scenario)


def test_images_for_a_model_without_vision_are_not_sent_and_the_user_hears_why(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            title = doors.model.model.title
            state = doors.attach.vision()
            assert not state.available
            assert state.reason == (f"{title} cannot see images: it has no vision projector. Choose a model tagged "
                                    "Vision, such as Gemma 3 4B (Get a model).")
            generated = len(engine.requests)
            assert not doors.chat.send("What is this?", images=[CHART])
            [problem] = started.events.of(ev.Problem)
            assert problem.kind == "model" and problem.text.startswith(state.reason)
            assert "not sent" in problem.text
            assert doors.chat.conversation is None and len(engine.requests) == generated, "nothing saved or asked"
            assert doors.chat.send("What is this?"), "text alone still goes"
            await doors.chat.wait_idle()

    run(scenario)


def test_a_projector_that_did_not_load_says_the_engines_words(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            give_sight(service, loaded=False, problem="The vision projector mmproj.gguf is damaged.")
            assert doors.attach.vision().reason == "The vision projector mmproj.gguf is damaged."
            assert not doors.chat.send("Look", images=[CHART])

    run(scenario)


def test_no_model_yet_says_so(started_service) -> None:
    async def scenario():
        async with started_service(install_model=False, start="open") as started:
            assert started.doors.attach.vision().reason == NO_MODEL

    run(scenario)


def test_a_text_model_answering_a_chat_with_images_is_told_of_them_and_never_given_them(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            give_sight(service)
            assert doors.chat.send("What is this?", images=[CHART])
            await doors.chat.wait_idle()
            take_sight(service)
            assert doors.chat.send("Thanks. Write a haiku about spring.")
            await doors.chat.wait_idle()
            first, second = user_turns(engine)
            assert first == (f"What is this?\n\n{UNSEEN.format(names='chart.png')}", ())
            assert second == ("Thanks. Write a haiku about spring.", ())

    run(scenario)


def test_a_question_about_images_is_left_unanswered_when_the_model_cannot_see(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            give_sight(service)
            assert doors.chat.send("What is this?", images=[CHART])
            await doors.chat.wait_idle()
            take_sight(service)
            asked = len(engine.requests)
            assert doors.chat.regenerate()
            await doors.chat.wait_idle()
            assert len(engine.requests) == asked
            problem = started.events.of(ev.Problem)[-1]
            assert "cannot see images" in problem.text and "Regenerate" in problem.text
            [user] = await stored(service, doors.chat.conversation.id)
            assert user.images == (CHART,), "the question stays, for a model that sees"

    run(scenario)


def test_read_images_checks_files_and_pasted_bytes_in_the_child(started_service, tmp_path: Path) -> None:
    async def scenario():
        async with started_service(start="open") as started:
            doors = started.doors
            good = write_image(tmp_path / "good.png", 30, 20)
            [image] = await doors.attach.read_images([good])
            assert (image.name, image.width, image.height) == ("good.png", 30, 20)
            pasted = await doors.attach.read_image_data(image_bytes(12, 10))
            assert (pasted.name, pasted.width) == ("Pasted image", 12)
            text = tmp_path / "notes.png"
            text.write_text("not a picture", encoding="utf-8")
            with pytest.raises(ImagesUnreadable) as refused:
                await doors.attach.read_images([good, text])
            said = str(refused.value)
            assert f"{text} cannot be used: it is not an image: it holds text." in said
            assert "save it again as PNG or JPEG" in said and str(good) not in said
            with pytest.raises(ImagesUnreadable, match="a message takes at most 8"):
                await doors.attach.read_images([good] * 9)

    run(scenario)


def test_each_image_counts_in_the_context_when_files_are_fitted() -> None:
    settings = GenerationSettings(max_tokens=24, temperature=0.0, context_length=1024)
    conversation = Conversation(1, "Club", 0.0, 0.0, "", settings, None)
    # About 520 estimated tokens: whole in a 1,024-token context, not beside two images (IMAGE_TOKENS each).
    assert IMAGE_TOKENS == 300
    club = AttachedFile("/home/ann/club.txt", "text", 100, (AttachedSection("The club meets on Thursdays. " * 72),))
    question = Message(1, 1, Role.USER, "When does the club meet?", 0.0, MessageState.COMPLETE, None,
                       attachments=(club,))
    documents = ChatDocuments(lambda: 1024)
    assert asyncio.run(documents.frame(conversation, [question])).sources
    assert documents.used(1).fit is Fit.WHOLE
    asyncio.run(documents.frame(conversation, [changed(question, images=(CHART, PHOTO))]))
    assert documents.used(1).fit is Fit.RETRIEVED


def widest_file_that_fits(history: list[Message], *, see_images: bool = True) -> int:
    """The most words a file attached to the last question may have and still go whole, in a chat
    whose tokens are counted one a word (so every difference between two chats is exact)."""
    settings = GenerationSettings(max_tokens=24, temperature=0.0, context_length=16_384)
    conversation = Conversation(1, "Pictures", 0.0, 0.0, "", settings, None)

    async def words(text: str) -> int:
        return len(text.split())

    def fits(length: int) -> bool:
        notes = AttachedFile("/home/ann/notes.txt", "text", 100, (AttachedSection("word " * length),))
        question = Message(99, 1, Role.USER, "What do my notes say?", 0.0, MessageState.COMPLETE, None,
                           attachments=(notes,))
        documents = ChatDocuments(lambda: 16_384, count=words)
        asyncio.run(documents.frame(conversation, [*history, question], see_images))
        return documents.used(1).fit is Fit.WHOLE

    low, high = 0, 16_384  # fits(low), not fits(high)
    assert fits(low) and not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def test_the_fit_counts_the_images_that_are_sent_and_no_others() -> None:
    turns = [tuple(AttachedImage(f"t{turn}-{n}.png", "image/png", 8, 8, CHART.data, "") for n in range(8))
             for turn in range(3)]
    history: list[Message] = []
    for turn, images in enumerate(turns):
        history.append(Message(2 * turn, 1, Role.USER, f"Question {turn}", 0.0, MessageState.COMPLETE, None,
                               images=images))
        history.append(Message(2 * turn + 1, 1, Role.ASSISTANT, f"Answer {turn}", 0.0, MessageState.COMPLETE, None))
    sent = [m for m in chat_of("", history) if m.images]
    assert sum(len(m.images) for m in sent) == PROMPT_IMAGES == 16 < 24, "the prompt takes the newest 16"

    def as_text(message: Message, unseen: bool) -> Message:
        """The message as words alone: its text as the prompt gives it when its images are not sent."""
        if not message.images or not unseen:
            return changed(message, images=())
        names = ", ".join(image.name for image in message.images)
        return changed(message, text=f"{message.text}\n\n{UNSEEN.format(names=names)}", images=())

    # The same chat in words alone: the oldest turn with the words the model is given instead of its images.
    words_alone = [as_text(m, unseen=number == 0) for number, m in enumerate(history)]
    assert widest_file_that_fits(words_alone) - widest_file_that_fits(history) == PROMPT_IMAGES * IMAGE_TOKENS
    # A model that cannot see is sent none: each turn's images cost only the words that say they were there.
    assert widest_file_that_fits(history, see_images=False) == widest_file_that_fits(
        [as_text(m, unseen=True) for m in history])


def test_images_a_model_cannot_see_take_no_room_in_the_fit(started_service) -> None:
    club = AttachedFile("/home/ann/club.txt", "text", 100, (AttachedSection("The club meets on Thursdays."),))

    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            give_sight(service)
            for turn in range(2):
                assert doors.chat.send(f"Question {turn}", images=[CHART] * 8)
                await doors.chat.wait_idle()
            loaded = service.session.loaded
            assert loaded is not None and PROMPT_IMAGES * IMAGE_TOKENS > loaded.context_length
            take_sight(service)  # the 16 images are not sent now, so they take none of the context
            assert doors.chat.send("When does the club meet?", attachments=(club,))
            await doors.chat.wait_idle()
            chat = doors.chat.conversation.id
            assert service.documents.used(chat).fit is Fit.WHOLE
            give_sight(service)  # sent again: with them, the file no longer fits whole
            assert doors.chat.send("And where?", attachments=(club,))
            await doors.chat.wait_idle()
            assert service.documents.used(chat).fit is Fit.RETRIEVED
            assert not started.events.of(ev.Problem)

    run(scenario)


def test_the_prompts_image_limit_is_the_engines() -> None:
    from app.engine.backends.llama import image_prompt

    assert PROMPT_IMAGES == image_prompt.MAX_IMAGES  # the service's copy of the engine's limit


def test_a_chat_of_more_images_than_a_prompt_takes_sends_the_newest_turns_images(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            give_sight(service)
            turns = [tuple(AttachedImage(f"t{turn}-{n}.png", "image/png", 8 + n, 4 + turn,
                                         image_bytes(8 + n, 4 + turn), "") for n in range(8)) for turn in range(3)]
            for turn, images in enumerate(turns):
                assert doors.chat.send(f"Question {turn}", images=list(images))
                await doors.chat.wait_idle()
                assert not started.events.of(ev.Problem)
            sent = user_turns(engine)
            assert sum(len(images) for _, images in sent) == PROMPT_IMAGES
            names = ", ".join(image.name for image in turns[0])
            assert sent == [(f"Question 0\n\n{UNSEEN.format(names=names)}", ()),
                            ("Question 1", tuple(i.data for i in turns[1])),
                            ("Question 2", tuple(i.data for i in turns[2]))]

    run(scenario)


class CountingCheck:
    """A check that notes how many run at once (each as long as a real child's start)."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.guard = threading.Lock()

    def __call__(self, items: Sequence[ImageInput]) -> Iterator[ImageResult]:
        with self.guard:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.2)
            yield from (check_image(item) for item in items)
        finally:
            with self.guard:
                self.running -= 1


def test_one_image_check_runs_at_a_time_for_the_window_and_the_api(tmp_path: Path) -> None:
    counting = CountingCheck()
    chips = [write_image(tmp_path / f"chip{n}.png", 10 + n, 10) for n in range(3)]
    ask = asking_with(ApiImage(0, "messages[0].content[1].image_url.url", image_bytes(16, 12)))

    async def scenario():
        return await asyncio.gather(*(read_images([chip], counting) for chip in chips),
                                    read_image_data(image_bytes(9, 9), check=counting), seen_images(ask, counting))

    *read, pasted, seen = run(scenario)
    assert [image.width for [image] in read] == [10, 11, 12] and pasted.width == 9
    assert len(seen.messages[0].images) == 1 and [(i.name, i.width) for i in seen.kept[0]] == [("API image 1", 16)]
    assert counting.most == 1


def test_a_check_that_cannot_start_is_said_in_the_windows_words_and_the_apis(tmp_path: Path) -> None:
    def cannot_start(items: Sequence[ImageInput]) -> Iterator[ImageResult]:
        raise RuntimeError("the image check process did not start")  # as LimitedChild says it

    with pytest.raises(ImagesUnreadable, match="^Kestrel could not start its image check: the image check process "
                                               "did not start. Try again"):
        run(lambda: read_images([write_image(tmp_path / "a.png", 5, 5)], cannot_start))
    with pytest.raises(ApiRefused) as refused:
        run(lambda: seen_images(asking_with(ApiImage(0, "messages[0]", image_bytes(5, 5))), cannot_start))
    assert refused.value.status == 503 and refused.value.message.startswith("Kestrel could not start its image check")


def asking_with(image: ApiImage) -> ApiAsk:
    return ApiAsk(endpoint="/v1/chat/completions", client="127.0.0.1:5000", model=None,
                  messages=(ChatMessage(Role.USER, "What is this?"),), images=(image,))
