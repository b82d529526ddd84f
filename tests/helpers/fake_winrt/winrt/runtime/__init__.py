"""PyWinRT's winrt.runtime: the apartment calls (recorded, nothing else)."""

from enum import IntEnum

joined: list[int] = []


class ApartmentType(IntEnum):
    SINGLE_THREADED = 0
    MULTI_THREADED = 1


def init_apartment(apartment_type: ApartmentType) -> None:
    joined.append(int(apartment_type))


def uninit_apartment() -> None:
    joined.clear()
