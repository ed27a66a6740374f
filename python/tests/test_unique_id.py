"""collgen.UniqueId: its text, bytes and pickle round trips, and the
library's refusal of damaged ids (length, characters, checksum)."""

import pickle
import random

import pytest

import collgen

TEXT_LEN = collgen.CONSTANTS["UNIQUE_ID_TEXT_LEN"]
NBYTES = collgen.CONSTANTS["UNIQUE_ID_BYTES"]
SUM_OFFSET = 96   # the checksum's first byte (src/unique_id.h, COLLGEN__UID_OFF_SUM)


def test_text_round_trip():
    uid = collgen.UniqueId.new()
    text = str(uid)
    assert len(text) == TEXT_LEN and text == text.lower()
    assert int(text, 16) >= 0
    back = collgen.UniqueId.from_text(text)
    assert back == uid and hash(back) == hash(uid) and str(back) == text
    assert collgen.UniqueId.from_text(text.upper()) == uid
    assert collgen.UniqueId.from_text(text.encode()) == uid


def test_fresh_ids_differ_and_hide_the_secret():
    a, b = collgen.UniqueId.new(), collgen.UniqueId.new()
    assert a != b and str(a) != str(b)
    assert repr(a) == "UniqueId(<secret>)"


def test_bytes_round_trip():
    uid = collgen.UniqueId.new()
    data = bytes(uid)
    assert len(data) == NBYTES and data.hex() == str(uid)
    assert collgen.UniqueId.from_bytes(data) == uid
    assert collgen.UniqueId.from_bytes(bytearray(data)) == uid


def test_pickle_round_trip():
    uid = collgen.UniqueId.new()
    back = pickle.loads(pickle.dumps(uid))
    assert isinstance(back, collgen.UniqueId) and back == uid and bytes(back) == bytes(uid)


@pytest.mark.parametrize("length", [0, TEXT_LEN - 1, TEXT_LEN + 1])
def test_from_text_refuses_a_wrong_length(length):
    text = (str(collgen.UniqueId.new()) * 2)[:length]
    with pytest.raises(collgen.InvalidArgument) as e:
        collgen.UniqueId.from_text(text)
    more = "more than " if length > TEXT_LEN else ""
    assert e.value.message == (f"unique id text has {more}{min(length, TEXT_LEN)} characters, "
                               f"expected exactly {TEXT_LEN} hex digits")


def test_from_text_refuses_a_non_hex_character():
    text = str(collgen.UniqueId.new())
    at = random.randrange(TEXT_LEN)
    with pytest.raises(collgen.InvalidArgument) as e:
        collgen.UniqueId.from_text(text[:at] + "g" + text[at + 1:])
    assert e.value.message == f"unique id text: character {at + 1} is 'g', not a hex digit"


def test_from_text_refuses_a_flipped_checksum_nibble():
    text = str(collgen.UniqueId.new())
    at = 2 * SUM_OFFSET + random.randrange(TEXT_LEN - 2 * SUM_OFFSET)
    flipped = format(int(text[at], 16) ^ 0x8, "x")
    with pytest.raises(collgen.InvalidArgument) as e:
        collgen.UniqueId.from_text(text[:at] + flipped + text[at + 1:])
    assert e.value.message == ("unique id text: unique id checksum mismatch "
                               "(the id was altered or truncated)")


def test_from_text_refuses_a_nul_and_a_non_string():
    with pytest.raises(ValueError, match="NUL"):
        collgen.UniqueId.from_text("\0" * TEXT_LEN)
    with pytest.raises(TypeError, match="text must be str"):
        collgen.UniqueId.from_text(12)


@pytest.mark.parametrize("length", [0, NBYTES - 1, NBYTES + 1])
def test_from_bytes_refuses_a_wrong_length(length):
    with pytest.raises(ValueError) as e:
        collgen.UniqueId.from_bytes(bytes(length))
    assert str(e.value) == f"data: a unique id is {NBYTES} bytes, not {length}"


def test_from_bytes_checks_the_id():
    data = bytearray(bytes(collgen.UniqueId.new()))
    data[random.randrange(16, 64)] ^= 0x01    # the tag or the secret: under the checksum
    with pytest.raises(collgen.InvalidArgument, match="checksum mismatch"):
        collgen.UniqueId.from_bytes(bytes(data))
