"""Qt key-sequence text ("Ctrl+Alt+Space") turned into each platform's modifiers and key."""

from __future__ import annotations

from dataclasses import dataclass

# Qt's PortableText modifier names, in the order Qt writes them.
_MODIFIERS = ("Ctrl", "Shift", "Alt", "Meta")

# A key Kestrel can listen for from other programs: Qt's PortableText name -> (the xkbcommon/X11
# keysym name, the X11 keysym value, the Windows virtual-key code). One table, so the three
# platforms never disagree about which keys they accept.
_NAMED_KEYS: dict[str, tuple[str, int, int]] = {
    "Space": ("space", 0x20, 0x20),
    "Return": ("Return", 0xFF0D, 0x0D),
    "Enter": ("KP_Enter", 0xFF8D, 0x0D),
    "Tab": ("Tab", 0xFF09, 0x09),
    "Esc": ("Escape", 0xFF1B, 0x1B),
    "Backspace": ("BackSpace", 0xFF08, 0x08),
    "Ins": ("Insert", 0xFF63, 0x2D),
    "Del": ("Delete", 0xFFFF, 0x2E),
    "Home": ("Home", 0xFF50, 0x24),
    "End": ("End", 0xFF57, 0x23),
    "PgUp": ("Prior", 0xFF55, 0x21),
    "PgDown": ("Next", 0xFF56, 0x22),
    "Left": ("Left", 0xFF51, 0x25),
    "Up": ("Up", 0xFF52, 0x26),
    "Right": ("Right", 0xFF53, 0x27),
    "Down": ("Down", 0xFF54, 0x28),
    "Print": ("Print", 0xFF61, 0x2C),
    "Pause": ("Pause", 0xFF13, 0x13),
    ",": ("comma", 0x2C, 0xBC),
    ".": ("period", 0x2E, 0xBE),
    "/": ("slash", 0x2F, 0xBF),
    ";": ("semicolon", 0x3B, 0xBA),
    "'": ("apostrophe", 0x27, 0xDE),
    "[": ("bracketleft", 0x5B, 0xDB),
    "]": ("bracketright", 0x5D, 0xDD),
    "\\": ("backslash", 0x5C, 0xDC),
    "-": ("minus", 0x2D, 0xBD),
    "=": ("equal", 0x3D, 0xBB),
    "`": ("grave", 0x60, 0xC0),
}

SETTINGS_PLACE = "Settings → Quick ask"


@dataclass(frozen=True)
class Unusable:
    """A sequence that cannot be a global shortcut, and the words that say why and what to do."""

    words: str


@dataclass(frozen=True)
class Chord:
    """One press of keys held together: Qt's modifier names and one key, all known."""

    modifiers: frozenset[str]
    key: str


@dataclass(frozen=True)
class X11Combination:
    """What XGrabKey takes: a modifier mask (before the lock keys are added) and a keysym."""

    modifier_mask: int
    keysym: int


@dataclass(frozen=True)
class WindowsCombination:
    """What RegisterHotKey takes: MOD_* flags (MOD_NOREPEAT included) and a virtual-key code."""

    modifiers: int
    virtual_key: int


# X11's core modifier bits (X.h). Meta is the Super/Windows key, which every X keymap puts on Mod4.
X11_SHIFT, X11_LOCK, X11_CONTROL, X11_MOD1, X11_MOD4 = 0x01, 0x02, 0x04, 0x08, 0x40
_X11_MASKS = {"Ctrl": X11_CONTROL, "Shift": X11_SHIFT, "Alt": X11_MOD1, "Meta": X11_MOD4}

# winuser.h
MOD_ALT, MOD_CONTROL, MOD_SHIFT, MOD_WIN, MOD_NOREPEAT = 0x0001, 0x0002, 0x0004, 0x0008, 0x4000
_WINDOWS_MODS = {"Ctrl": MOD_CONTROL, "Shift": MOD_SHIFT, "Alt": MOD_ALT, "Meta": MOD_WIN}

# The shortcuts XDG specification's modifier names (xkbcommon's XKB_MOD_NAME_*).
_PORTAL_MODS = {"Ctrl": "CTRL", "Shift": "SHIFT", "Alt": "ALT", "Meta": "LOGO"}


def chord(sequence: str) -> Chord | Unusable:
    """Read Qt PortableText for one chord, or say why it cannot be a global shortcut."""
    text = sequence.strip()
    if not text:
        return Unusable(f"No shortcut is set: press the keys you want in {SETTINGS_PLACE}.")
    if ", " in text:
        return Unusable(
            f"{text} is several presses one after another; a global shortcut is one press of keys "
            f"held together, such as Ctrl+Alt+Space. Choose another in {SETTINGS_PLACE}."
        )
    # "Ctrl++" names the + key: split off the last key before splitting the modifiers.
    head, key = (text[:-2], "+") if text.endswith("++") else text.rpartition("+")[::2]
    names = [part for part in head.split("+") if part] if head else []
    unknown = [name for name in names if name not in _MODIFIERS]
    if unknown:
        return _unknown_key(text, unknown[0])
    if not set(names) - {"Shift"}:
        return Unusable(
            f"{text} has no Ctrl, Alt or Meta key: a global shortcut needs one, or it would take "
            f"that key from every program. Choose another in {SETTINGS_PLACE}."
        )
    normal = key.upper() if len(key) == 1 else key
    if not _known_key(normal):
        return _unknown_key(text, key)
    return Chord(frozenset(names), normal)


def x11_combination(sequence: str) -> X11Combination | Unusable:
    """The X11 modifier mask and keysym for a Qt key sequence."""
    read = chord(sequence)
    if isinstance(read, Unusable):
        return read
    mask = 0
    for name in read.modifiers:
        mask |= _X11_MASKS[name]
    return X11Combination(mask, _key_facts(read.key)[1])


def windows_combination(sequence: str) -> WindowsCombination | Unusable:
    """RegisterHotKey's modifiers (with MOD_NOREPEAT, so a held key fires once) and virtual key."""
    read = chord(sequence)
    if isinstance(read, Unusable):
        return read
    modifiers = MOD_NOREPEAT
    for name in read.modifiers:
        modifiers |= _WINDOWS_MODS[name]
    return WindowsCombination(modifiers, _key_facts(read.key)[2])


def portal_trigger(sequence: str) -> str | Unusable:
    """The shortcuts XDG specification's trigger text, e.g. "CTRL+ALT+space", for the portal."""
    read = chord(sequence)
    if isinstance(read, Unusable):
        return read
    mods = [_PORTAL_MODS[name] for name in _MODIFIERS if name in read.modifiers]
    return "+".join([*mods, _key_facts(read.key)[0]])


def _known_key(key: str) -> bool:
    """Whether the key is in the table, a letter, a digit or F1–F24."""
    try:
        _key_facts(key)
    except KeyError:
        return False
    return True


def _key_facts(key: str) -> tuple[str, int, int]:
    """(keysym name, X11 keysym, Windows virtual key) for a key chord() accepted."""
    if key in _NAMED_KEYS:
        return _NAMED_KEYS[key]
    if len(key) == 1 and ("A" <= key <= "Z" or "0" <= key <= "9"):
        # Latin letters and digits: the keysym is the lower-case character, the virtual key the upper.
        return key.lower(), ord(key.lower()), ord(key)
    if key.startswith("F") and key[1:].isdigit() and 1 <= int(key[1:]) <= 24:
        number = int(key[1:])
        return key, 0xFFBE + number - 1, 0x70 + number - 1
    raise KeyError(key)


def _unknown_key(text: str, key: str) -> Unusable:
    """Words for a key Kestrel cannot listen for."""
    return Unusable(
        f"Kestrel can't listen for {key} from other programs ({text}). Choose a shortcut that ends "
        f"in a letter, a digit, F1–F24, Space or another named key in {SETTINGS_PLACE}."
    )
