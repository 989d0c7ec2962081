"""ctypes declarations of ``libmrcep.so`` (``native/include/mrcep.h``), built by ``make native``
next to this file. Structures mirror the C ones field for field."""

from __future__ import annotations

import ctypes as C
import pathlib

LIB_PATH = pathlib.Path(__file__).with_name("libmrcep.so")
RTX_REASONS = ("", "nack_trimmed", "nack_trimmed_lasthop", "nack_resource", "nack_psn_oor_window",
               "sack_gap", "rto", "nak_seq")
"""enum mrc_rtx_reason, index -> the Python endpoint's retransmit-reason key."""


class NativeUnavailable(ImportError):
    """libmrcep.so is not built (run ``make native``) or cannot be loaded."""


class OutPkt(C.Structure):
    """struct mrc_out_pkt without its data array, whose size the library tells (load())."""

    _fields_ = [("len", C.c_uint32), ("qpn", C.c_uint32), ("tclass", C.c_uint8), ("peer", C.c_uint8 * 16)]


class Outbox(C.Structure):
    _fields_ = [("pkts", C.c_void_p), ("count", C.c_uint32), ("cap", C.c_uint32)]


class CcCfg(C.Structure):
    _fields_ = [("mtu", C.c_int64), ("initial_cwnd", C.c_int64), ("max_cwnd", C.c_int64),
                ("target_qdelay_ns", C.c_int64), ("eta", C.c_double), ("fi", C.c_double),
                ("gamma", C.c_double), ("max_md", C.c_double)]


class ReqCfg(C.Structure):
    _fields_ = [("qpn", C.c_uint32), ("remote_qpn", C.c_uint32), ("local", C.c_uint8 * 16),
                ("peer", C.c_uint8 * 16), ("mtu", C.c_uint32), ("mpr", C.c_uint32),
                ("initial_psn", C.c_uint32), ("timeout_exp", C.c_uint32), ("linear_retries", C.c_uint32),
                ("exp_retries", C.c_uint32), ("reorder_packets", C.c_uint32), ("cc", CcCfg), ("rc", C.c_uint32)]


class ReqStats(C.Structure):
    _fields_ = [(n, C.c_uint64) for n in ("packets", "payload_bytes", "acked_bytes", "sacks", "ecn_sacks",
                                          "timeouts", "probes", "icrc_checked", "bad_icrc", "completions",
                                          "malformed")] + \
               [("retransmits", C.c_uint64 * len(RTX_REASONS)), ("nacks", C.c_uint64 * 256)] + \
               [(n, C.c_uint64) for n in ("acks", "seq_naks")]


class RespStats(C.Structure):
    _fields_ = [(n, C.c_uint64) for n in ("packets", "icrc_checked", "bad_icrc", "malformed", "unknown_qp",
                                          "duplicates", "placed_packets", "placed_bytes", "ce_marked",
                                          "trimmed", "probes", "sacks", "imm_completions")] + \
               [("nacks", C.c_uint64 * 256)] + [(n, C.c_uint64) for n in ("acks", "seq_naks", "out_of_sequence")]


class Completion(C.Structure):
    _fields_ = [("wr_id", C.c_uint64), ("status", C.c_int32)]


class RecvComp(C.Structure):
    _fields_ = [("qpn", C.c_uint32), ("imm", C.c_uint32), ("rqmsn", C.c_uint32), ("psn", C.c_uint32)]


class EpEvent(C.Structure):
    _fields_ = [("kind", C.c_uint32), ("qpn", C.c_uint32), ("wr_id", C.c_uint64), ("status", C.c_int32),
                ("recv", RecvComp)]


class Arrival(C.Structure):
    """struct mrc_arrival: one datagram handed to the responder (the arrival log)."""

    _fields_ = [("arrival_ns", C.c_int64), ("ev", C.c_uint32), ("tx_timestamp", C.c_uint16),
                ("has_ts", C.c_uint16)]


EV_SEND, EV_RECV = 1, 2
"""struct mrc_ep_event kinds (MRCEP_EV_SEND, MRCEP_EV_RECV)."""

_P = C.c_void_p
PKT_STRIDE = PKT_DATA = 0
"""sizeof(struct mrc_out_pkt) and offsetof(..., data), set by lib()."""
_U8P = C.POINTER(C.c_uint8)
_SIGNATURES = {
    "mrcep_tuning": (C.c_int64, [C.c_char_p]),
    "mrcep_out_pkt_size": (C.c_uint32, []),
    "mrcep_out_pkt_data_offset": (C.c_uint32, []),
    "mrcep_rtx_count": (C.c_uint32, []),
    "mrcep_outbox_new": (C.POINTER(Outbox), []),
    "mrcep_outbox_free": (None, [C.POINTER(Outbox)]),
    "mrcep_outbox_clear": (None, [C.POINTER(Outbox)]),
    "mrcep_crc_impl": (C.c_char_p, []),
    "mrcep_crc32": (C.c_uint32, [C.c_uint32, C.c_char_p, C.c_uint64]),
    "mrcep_req_new": (_P, [C.POINTER(ReqCfg), C.POINTER(Outbox), C.c_char_p, C.c_int]),
    "mrcep_req_free": (None, [_P]),
    "mrcep_req_post": (C.c_int64, [_P, _P, C.c_uint64, C.c_uint64, C.c_uint32, C.c_int, C.c_uint32]),
    "mrcep_req_pump": (C.c_int, [_P, C.c_int64, C.c_int]),
    "mrcep_req_on_reply": (None, [_P, C.c_char_p, C.c_uint32, C.c_int64]),
    "mrcep_req_on_sack": (None, [_P, C.c_char_p, C.c_int64]),
    "mrcep_req_on_nack": (None, [_P, C.c_char_p, C.c_int64]),
    "mrcep_req_on_ack": (None, [_P, C.c_char_p, C.c_int64]),
    "mrcep_req_on_timer": (C.c_int64, [_P, C.c_int64]),
    "mrcep_req_send_probe": (None, [_P, C.c_int64]),
    "mrcep_req_busy": (C.c_int, [_P]),
    "mrcep_req_poll": (C.c_int, [_P, C.POINTER(Completion)]),
    "mrcep_req_fail": (None, [_P, C.c_char_p]),
    "mrcep_req_error": (C.c_char_p, [_P]),
    "mrcep_req_stats": (C.POINTER(ReqStats), [_P]),
    "mrcep_req_cwnd": (C.c_double, [_P]),
    "mrcep_req_inflight": (C.c_int64, [_P]),
    "mrcep_req_next_psn": (C.c_int64, [_P]),
    "mrcep_req_una": (C.c_int64, [_P]),
    "mrcep_resp_new": (_P, [C.c_char_p, C.c_uint32, C.POINTER(Outbox)]),
    "mrcep_resp_free": (None, [_P]),
    "mrcep_resp_add_qp": (C.c_int, [_P, C.c_uint32, C.c_uint32, C.c_uint32, C.c_uint32, C.c_uint32, C.c_char_p]),
    "mrcep_resp_set_remote_qpn": (C.c_int, [_P, C.c_uint32, C.c_uint32]),
    "mrcep_resp_set_rc": (C.c_int, [_P, C.c_uint32, C.c_int]),
    "mrcep_resp_mr_add": (C.c_int, [_P, C.c_uint32, C.c_uint64, _P, C.c_uint64]),
    "mrcep_resp_mr_del": (C.c_int, [_P, C.c_uint32]),
    "mrcep_resp_mr_placed": (C.c_uint64, [_P, C.c_uint32]),
    "mrcep_resp_handle": (None, [_P, _P, C.c_uint32, C.c_uint8, C.c_uint32, C.c_uint16, C.c_char_p]),
    "mrcep_resp_flush": (None, [_P]),
    "mrcep_resp_poll": (C.c_int, [_P, C.POINTER(RecvComp)]),
    "mrcep_resp_stats": (C.POINTER(RespStats), [_P]),
    "mrcep_resp_qp_error": (C.c_char_p, [_P, C.c_uint32]),
    "mrcep_resp_qp_epsn": (C.c_int64, [_P, C.c_uint32]),
    "mrcep_resp_qp_high": (C.c_int64, [_P, C.c_uint32]),
    "mrcep_resp_qp_ooo": (C.c_int64, [_P, C.c_uint32]),
    "mrcep_req_outstanding": (C.c_int, [_P, C.c_int64]),
    "mrcep_req_set_cwnd": (None, [_P, C.c_double]),
    "mrcep_ep_new": (_P, [C.c_char_p, C.c_uint16, C.c_uint16, C.c_uint32, C.c_int, C.c_char_p, C.c_int]),
    "mrcep_ep_start": (C.c_int, [_P]),
    "mrcep_ep_stop": (None, [_P]),
    "mrcep_ep_free": (None, [_P]),
    "mrcep_ep_lock": (None, [_P]),
    "mrcep_ep_unlock": (None, [_P]),
    "mrcep_ep_resp": (_P, [_P]),
    "mrcep_ep_outbox": (C.POINTER(Outbox), [_P]),
    "mrcep_ep_add_req": (C.c_int, [_P, C.c_uint32, _P]),
    "mrcep_ep_kick": (None, [_P, C.c_uint32]),
    "mrcep_ep_wait": (C.c_int, [_P, C.POINTER(EpEvent), C.c_int64]),
    "mrcep_ep_error": (C.c_char_p, [_P]),
    "mrcep_ep_send_errors": (C.c_uint64, [_P]),
    "mrcep_ep_turn": (C.c_int, [_P, C.c_int64]),
    "mrcep_ep_log_arrivals": (C.c_int, [_P, C.c_int]),
    "mrcep_ep_arrivals": (C.c_uint32, [_P, C.POINTER(Arrival), C.c_uint32]),
    "mrcep_ep_arrivals_lost": (C.c_uint64, [_P]),
    "mrcep_ep_dispatch": (None, [_P, _P, C.c_uint32, C.c_uint8, C.c_uint32, C.c_uint16, C.c_char_p, C.c_int64]),
}

_lib: C.CDLL | None = None


def lib() -> C.CDLL:
    """The loaded library with every signature declared.

    Raises:
        NativeUnavailable: not built, or built from another version of ``mrcep.h``.
    """
    global _lib, PKT_STRIDE, PKT_DATA
    if _lib is None:
        if not LIB_PATH.exists():
            raise NativeUnavailable(f"{LIB_PATH} is not built: run `make native`")
        try:
            dll = C.CDLL(str(LIB_PATH))
        except OSError as exc:
            raise NativeUnavailable(f"cannot load {LIB_PATH}: {exc}") from None
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(dll, name, None)
            if fn is None:
                raise NativeUnavailable(f"{LIB_PATH} lacks {name}: rebuild it with `make native`")
            fn.restype, fn.argtypes = res, args
        if dll.mrcep_rtx_count() != len(RTX_REASONS):
            raise NativeUnavailable(f"{LIB_PATH} is stale: rebuild it with `make native`")
        PKT_STRIDE, PKT_DATA = dll.mrcep_out_pkt_size(), dll.mrcep_out_pkt_data_offset()
        _lib = dll
    return _lib


def available() -> str | None:
    """None when the library loads, else the reason it does not (for test skips)."""
    try:
        lib()
    except NativeUnavailable as exc:
        return str(exc)
    return None


def buffer_address(obj) -> tuple[int, object]:
    """(address, keeper) of a bytes-like object's first byte; ``keeper`` must outlive any use
    of the address. Read-only buffers (bytes) are supported."""
    view = memoryview(obj).cast("B")
    if view.readonly:
        keeper = C.c_char_p(view.tobytes()) if not isinstance(obj, bytes) else C.c_char_p(obj)
        return C.cast(keeper, C.c_void_p).value or 0, keeper
    arr = (C.c_uint8 * len(view)).from_buffer(view) if len(view) else None
    return (C.addressof(arr) if arr is not None else 0), (arr, view)
