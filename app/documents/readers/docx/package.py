"""A .docx's parts unpacked under limits its zip directory cannot lie past, for python-docx to read from memory.

zipfile's read() inflates a member's compressed bytes in one call before it cuts them to the
size the directory declares, so a directory that says 1,000 bytes over data that inflates to
1 GiB costs 1 GiB. Here each part is inflated a piece at a time and stops one byte past its
declared size, which is an error; only the XML parts python-docx parses are inflated at all
(images and other media are handed over empty: their text is none), and those together are
bounded by ReadLimits.max_xml_bytes. python-docx then reads a stored (uncompressed) zip whose
sizes are true.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from typing import BinaryIO

from app.documents.refusal import Refused
from app.documents.values import ReadLimits, UnreadableCause as Cause

# Word's older format and its password-protected .docx files are OLE compound files, not zips.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAX_MEMBERS = 10_000
_PIECE = 1 << 16  # compressed bytes fed to the inflater at a time
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # as zipfile's structFileHeader
_XML_SUFFIXES = (".xml", ".rels")


def megabytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def docx_package(file: BinaryIO, limits: ReadLimits) -> tuple[io.BytesIO, int]:
    """The .docx open in `file` as a stored zip in memory, with its XML parts inflated (under
    the limits) and every other part empty; and how many bytes of XML it holds. Refused for a
    password-protected or old Word file, a damaged zip, a zip bomb or a lying directory."""
    if file.read(len(_OLE_MAGIC)) == _OLE_MAGIC:
        raise Refused(Cause.ENCRYPTED, "password-protected Word document (or an old .doc file "
                                       "renamed): save a copy without the password as .docx")
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        raise Refused(Cause.DAMAGED, "damaged Word document: it is not a valid .docx (zip) file") from None
    with archive:
        members = archive.infolist()
        _check_directory(members, limits)
        package = io.BytesIO()
        xml_bytes = 0
        with zipfile.ZipFile(package, "w", zipfile.ZIP_STORED) as out:
            for member in members:
                if _is_xml(member.filename):
                    out.writestr(member.filename, _inflated(file, member))
                    xml_bytes += member.file_size
                elif not member.is_dir():
                    out.writestr(member.filename, b"")
    package.seek(0)
    return package, xml_bytes


def _is_xml(name: str) -> bool:
    return name.lower().endswith(_XML_SUFFIXES)


def _check_directory(members: list[zipfile.ZipInfo], limits: ReadLimits) -> None:
    """Refuse by what the directory declares, before a byte is inflated."""
    declared = sum(member.file_size for member in members)
    if declared > limits.max_unpacked_bytes or len(members) > _MAX_MEMBERS:
        raise Refused(Cause.TOO_LARGE, f"this .docx would unpack to {declared // 2**20:,} MB in "
                                       f"{len(members):,} parts, more than the {limits.max_unpacked_bytes // 2**20:,} "
                                       "MB Kestrel unpacks (a compressed \"zip bomb\"?)")
    xml = sum(member.file_size for member in members if _is_xml(member.filename))
    if xml > limits.max_xml_bytes:
        raise Refused(Cause.TOO_LARGE, f"too large for Kestrel to read: {megabytes(xml)} of text/XML, the limit is "
                                       f"{megabytes(limits.max_xml_bytes)}. Split the document into smaller ones, "
                                       "or save it as PDF or text")
    names = [member.filename for member in members]
    if len(set(names)) != len(names):  # python-docx would read one, Word the other: which is unknown
        raise Refused(Cause.DAMAGED, "damaged Word document: two of its parts have the same name")


def _inflated(file: BinaryIO, member: zipfile.ZipInfo) -> bytes:
    """The member's bytes, never more than its declared size (one byte more is a refusal)."""
    if member.flag_bits & 0x1:
        raise Refused(Cause.ENCRYPTED, "password-protected Word document: save a copy without the password")
    file.seek(member.header_offset)
    header = file.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise Refused(Cause.DAMAGED, f"damaged Word document: its part {member.filename} is not where its zip "
                                     "directory says")
    fields = _LOCAL_HEADER.unpack(header)
    file.seek(fields[-2] + fields[-1], io.SEEK_CUR)  # past the name and the extra field
    if member.compress_type == zipfile.ZIP_STORED:
        data = file.read(min(member.compress_size, member.file_size + 1))
    elif member.compress_type == zipfile.ZIP_DEFLATED:
        data = _inflate(file, member)
    else:
        raise Refused(Cause.DAMAGED, f"unusual Word document: its part {member.filename} is compressed in a way "
                                     "Word does not use")
    if len(data) > member.file_size:
        raise Refused(Cause.DAMAGED, f"damaged or hostile Word document: its zip directory says {member.filename} "
                                     f"holds {member.file_size:,} bytes, but it unpacks to more (a \"zip bomb\"?). "
                                     "Kestrel stopped there")
    if len(data) != member.file_size or zlib.crc32(data) != member.CRC:
        raise Refused(Cause.DAMAGED, f"damaged Word document: its part {member.filename} is cut short or altered")
    return data


def _inflate(file: BinaryIO, member: zipfile.ZipInfo) -> bytes:
    """Deflated data inflated a piece at a time, stopping one byte past the declared size."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    out = bytearray()
    left_in = member.compress_size
    pending = b""
    try:
        while not inflater.eof and len(out) <= member.file_size:
            if not pending:
                pending = file.read(min(_PIECE, left_in)) if left_in > 0 else b""
                if not pending:
                    break  # the compressed data ended before the stream did: cut short
                left_in -= len(pending)
            out += inflater.decompress(pending, member.file_size + 1 - len(out))
            pending = inflater.unconsumed_tail
    except zlib.error:
        raise Refused(Cause.DAMAGED, f"damaged Word document: its part {member.filename} does not unpack") from None
    return bytes(out)
