"""A python-dbusmock template: a fake xdg-desktop-portal serving org.freedesktop.portal.GlobalShortcuts.

It follows the portal's published interface (flatpak.github.io/xdg-desktop-portal, GlobalShortcuts
version 1 and 2, and org.freedesktop.portal.Request); it is written from that text, not recorded from
a real desktop. Each call answers at once with the Request object's path and then, after the reply has
gone out, emits that Request's Response signal, as the real portal does.

Parameters (JSON, `python -m dbusmock --template <this file> -p '{...}'`):
- "version": the interface's version property (default 1);
- "refuse": a Response code for BindShortcuts (0 grants; 1 is "the user cancelled", 2 "other").

For the test: `org.freedesktop.DBus.Mock.PressShortcut(s shortcut_id)` emits Activated (and
Deactivated) for the last session created, and `BoundTriggers()` gives the preferred triggers asked for.

Run by an interpreter that has python-dbusmock and dbus-python, never imported by the tests.
"""

from __future__ import annotations

from typing import Any, Callable

import dbus
import dbus.service
from dbusmock import MOCK_IFACE

BUS_NAME = "org.freedesktop.portal.Desktop"
MAIN_OBJ = "/org/freedesktop/portal/desktop"
MAIN_IFACE = "org.freedesktop.portal.GlobalShortcuts"
REQUEST_IFACE = "org.freedesktop.portal.Request"
SYSTEM_BUS = False


def load(mock: Any, parameters: dict[str, Any]) -> None:
    """Set the version and the refusal mode, and an empty session list."""
    mock.AddProperties(MAIN_IFACE, {"version": dbus.UInt32(int(parameters.get("version", 1)))})
    mock.portal_refuse = int(parameters.get("refuse", 0))
    mock.portal_sessions = []
    mock.portal_triggers = []


def _sender_part(sender: str) -> str:
    """The caller's unique name as the spec puts it in a path: ':1.42' -> '1_42'."""
    return sender.lstrip(":").replace(".", "_")


def _respond(mock: Any, path: str, code: int, results: dict[str, Any]) -> None:
    """Emit Response on the Request object at path."""
    mock.EmitSignalDetailed(REQUEST_IFACE, "Response", "ua{sv}", [dbus.UInt32(code), results], {"path": path})


@dbus.service.method(MAIN_IFACE, in_signature="a{sv}", out_signature="o", sender_keyword="sender",
                     async_callbacks=("reply", "error"))
def CreateSession(self: Any, options: dict[str, Any], sender: str, reply: Callable[..., None],
                  error: Callable[..., None]) -> None:
    """Answer with the Request path, then the session handle through Response."""
    part = _sender_part(sender)
    request = f"/org/freedesktop/portal/desktop/request/{part}/{options.get('handle_token', 'r0')}"
    session = f"/org/freedesktop/portal/desktop/session/{part}/{options.get('session_handle_token', 's0')}"
    self.portal_sessions.append(session)
    reply(dbus.ObjectPath(request))
    _respond(self, request, 0, {"session_handle": dbus.String(session)})


@dbus.service.method(MAIN_IFACE, in_signature="oa(sa{sv})sa{sv}", out_signature="o", sender_keyword="sender",
                     async_callbacks=("reply", "error"))
def BindShortcuts(self: Any, session: str, shortcuts: list[Any], parent_window: str, options: dict[str, Any],
                  sender: str, reply: Callable[..., None], error: Callable[..., None]) -> None:
    """Grant (or refuse, by the "refuse" parameter) the shortcuts asked for, through Response."""
    request = f"/org/freedesktop/portal/desktop/request/{_sender_part(sender)}/{options.get('handle_token', 'b0')}"
    reply(dbus.ObjectPath(request))
    if str(session) not in self.portal_sessions:
        _respond(self, request, 2, {})
        return
    if self.portal_refuse:
        _respond(self, request, self.portal_refuse, {})
        return
    granted = []
    for shortcut_id, info in shortcuts:
        trigger = str(info.get("preferred_trigger", ""))
        self.portal_triggers.append(trigger)
        granted.append(dbus.Struct((shortcut_id, {"description": info.get("description", ""),
                                                  "trigger_description": dbus.String(trigger)}),
                                   signature="sa{sv}"))
    _respond(self, request, 0, {"shortcuts": dbus.Array(granted, signature="(sa{sv})")})


@dbus.service.method(MOCK_IFACE, in_signature="s", out_signature="")
def PressShortcut(self: Any, shortcut_id: str) -> None:
    """Emit Activated then Deactivated for shortcut_id in the last session created."""
    session = dbus.ObjectPath(self.portal_sessions[-1])
    for name in ("Activated", "Deactivated"):
        self.EmitSignal(MAIN_IFACE, name, "osta{sv}", [session, shortcut_id, dbus.UInt64(1), {}])


@dbus.service.method(MOCK_IFACE, in_signature="", out_signature="as")
def BoundTriggers(self: Any) -> list[str]:
    """The preferred triggers the client asked for, in order."""
    return list(self.portal_triggers)
