"""Tests for the conversation values: enum strings on disk never change."""

from __future__ import annotations

import dataclasses

import pytest

from app.core.conversation import Conversation, Message, MessageState, Role
from app.core.generation import GenerationSettings


def test_role_values_are_the_strings_stored_on_disk() -> None:
    assert {role.name: role.value for role in Role} == {
        "SYSTEM": "system",
        "USER": "user",
        "ASSISTANT": "assistant",
        "TOOL": "tool",
    }
    assert Role("user") is Role.USER


def test_message_state_values_are_the_strings_stored_on_disk() -> None:
    assert {state.name: state.value for state in MessageState} == {
        "COMPLETE": "complete",
        "STREAMING": "streaming",
        "INTERRUPTED": "interrupted",
    }
    assert MessageState("interrupted") is MessageState.INTERRUPTED


def test_values_are_frozen() -> None:
    message = Message(1, 1, Role.USER, "hi", 0.0, MessageState.COMPLETE, None)
    conversation = Conversation(1, "t", 0.0, 0.0, "", GenerationSettings(), None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        conversation.title = "changed"  # type: ignore[misc]
    assert dataclasses.replace(message, text="new").text == "new"
