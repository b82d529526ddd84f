"""`kestrel link`: Kestrel Link's sharing side, sharing on or off, a pairing code, the paired devices and revoking one.

Contacts nothing: it reads and writes this PC's settings and the files in Kestrel's data folder
(app/server/link). The sharing server itself runs in the window, or in `kestrel serve --share`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time

from app.cli.terminal_text import terminal_line
from app.cli.user_error import EXIT_OK, EXIT_USAGE, UserError
from app.core.paths import data_paths
from app.core.settings import SettingsError, SettingsFile
from app.library.servers.link_code import shown_fingerprint
from app.server.link.pairing_codes import WaitingCode
from app.server.link.files import LinkFiles, shared_address

ADD_THERE = "On the other PC: kestrel servers pair {address} {code} [--name NAME]"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    link = commands.add_parser("link", help="share this PC's models with your other PCs (Kestrel Link): sharing, "
                                            "pairing codes, paired devices")
    actions = link.add_subparsers(dest="action", metavar="ACTION", required=True)
    share = actions.add_parser("share", help="turn sharing on or off (the window and kestrel serve follow it), or "
                                             "say its state")
    share.add_argument("state", choices=["on", "off", "status"])
    share.set_defaults(run=run, handler=_share)
    code = actions.add_parser("code", help="make a pairing code for another PC (10 minutes, used once)")
    code.set_defaults(run=run, handler=_code)
    devices = actions.add_parser("devices", help="the devices paired with this PC")
    devices.add_argument("--json", action="store_true", help="one JSON object per device and line")
    devices.set_defaults(run=run, handler=_devices)
    revoke = actions.add_parser("revoke", help="unpair a device: its key is refused from its next request on")
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(run=run, handler=_revoke)


def run(args: argparse.Namespace) -> int:
    try:
        status: int = args.handler(args, LinkFiles.at(data_paths().ensure()))
        return status
    except UserError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return exc.status


def code_lines(code: WaitingCode, address: str, now: float) -> list[str]:
    """A pairing code as both `kestrel link code` and `kestrel serve --share` say it."""
    minutes = max(1, round(code.seconds_left(now) / 60))
    return [f"Pairing code: {code.text} (for {minutes} minutes, used once)",
            f"Certificate fingerprint: {shown_fingerprint(code.fingerprint)}",
            ADD_THERE.format(address=address, code=code.text)]


def _share(args: argparse.Namespace, files: LinkFiles) -> int:
    settings_file = SettingsFile(data_paths().settings_file)
    settings = settings_file.load()
    server = settings.server
    if args.state != "status":
        try:
            settings_file.save(dataclasses.replace(settings, server=dataclasses.replace(server, share=args.state == "on")))
        except SettingsError as exc:
            raise UserError(str(exc), EXIT_USAGE) from None
        if args.state == "off":
            files.codes.cancel()
            print("Sharing is off: the window stops its sharing server, and nothing listens beyond this PC for it.")
            return EXIT_OK
        try:
            files.certificate()
        except OSError as exc:
            raise UserError(f"Kestrel could not make its certificate in {files.folder} ({exc.strerror}).",
                            EXIT_USAGE) from None
        print("Sharing is on: the window (or kestrel serve --share) shares your models with paired PCs.")
    else:
        print(f"Sharing is {'on' if server.share else 'off'}.")
    address = shared_address(server.share_host, server.share_port)
    certificate = files.known_certificate()
    print(f"Address for other PCs: {address}")
    if certificate is not None:
        print(f"Certificate fingerprint: {shown_fingerprint(certificate.fingerprint)}")
    waiting = files.codes.waiting()
    if waiting is not None:
        print(f"Pairing code waiting: {waiting.text} ({waiting.seconds_left(time.time()) // 60} min left)")
    print(f"Paired devices: {len(files.devices.list())} (kestrel link devices)")
    return EXIT_OK


def _code(args: argparse.Namespace, files: LinkFiles) -> int:
    try:
        code = files.new_code()
    except OSError as exc:
        raise UserError(f"Kestrel could not keep a pairing code in {files.folder} ({exc.strerror}).",
                        EXIT_USAGE) from None
    server = SettingsFile(data_paths().settings_file).load().server
    for line in code_lines(code, shared_address(server.share_host, server.share_port), time.time()):
        print(line)
    if not server.share:
        print("Sharing is off: turn it on (kestrel link share on) before the other PC pairs.", file=sys.stderr)
    return EXIT_OK


def _devices(args: argparse.Namespace, files: LinkFiles) -> int:
    devices = files.devices.list()
    for device in devices:
        paired = datetime.datetime.fromtimestamp(device.paired).astimezone()
        if args.json:
            print(json.dumps({"name": device.name, "paired": paired.isoformat(timespec="seconds")},
                             ensure_ascii=False))
        else:
            print(f"{terminal_line(device.name)}\tpaired {paired:%Y-%m-%d %H:%M}")
    if not devices and not args.json:
        print("No device is paired. Make a pairing code (kestrel link code) and type it on the other PC.",
              file=sys.stderr)
    return EXIT_OK


def _revoke(args: argparse.Namespace, files: LinkFiles) -> int:
    try:
        revoked = files.devices.revoke(args.name)
    except OSError as exc:
        raise UserError(f"The device could not be removed ({exc.strerror}).", EXIT_USAGE) from None
    if revoked is None:
        raise UserError(f'No device called "{args.name}" is paired (kestrel link devices lists them).', EXIT_USAGE)
    print(f"Removed {terminal_line(revoked.name)}: its key is refused from its next request on.")
    return EXIT_OK
