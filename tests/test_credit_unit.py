# amaranth: UnusedElaboratable=no
"""The credit protocol's parameters (``hdl.common.credit``): fast checks without a
simulator. Its behaviour is proved in ``tests/test_credit_formal.py``."""

import pytest
from amaranth.hdl import Shape
from amaranth.lib import data

from hdl.common.credit import CreditReceiver, CreditSender, CreditSignature
from hdl.muon.layouts import MuonLinkSignature, flit_layout

FLIT = flit_layout()


def test_one_vc_is_the_single_link():
    sig = CreditSignature(8, 4)
    assert (sig.depth, sig.depths, sig.vcs) == (4, (4,), 1)
    assert sorted(sig.members) == ["credit", "payload", "valid"]
    assert Shape.cast(sig.members["credit"].shape).width == 1
    assert sig == CreditSignature(8, 4) and sig != CreditSignature(8, 5)


def test_several_vcs_have_a_depth_and_a_credit_bit_each():
    sig = CreditSignature(FLIT, (8, 4), vcs=2)
    assert (sig.depth, sig.vcs) == ((8, 4), 2)
    assert Shape.cast(sig.members["credit"].shape).width == 2
    assert CreditSignature(FLIT, 3, vcs=2).depths == (3, 3)
    link = MuonLinkSignature(96, 8, 4)
    assert link.depths == (8, 4) and link.members["payload"].shape == FLIT


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((8, 0), {}, ValueError, "depth must be in 1..256"),
    ((8, 257), {}, ValueError, "depth must be in 1..256"),
    ((8, 2.0), {}, TypeError, "depth must be an integer"),
    ((8, 2), {"vcs": 0}, ValueError, "vcs must be in 1..8"),
    ((8, 2), {"vcs": True}, TypeError, "vcs must be an integer"),
    ((FLIT, (8, 4, 2)), {"vcs": 2}, TypeError, "a tuple of 2 integers"),
    ((FLIT, (8, 0)), {"vcs": 2}, ValueError, "depth of VC 1 must be in 1..256"),
    ((8, 2), {"vcs": 2}, TypeError, r"unsigned\(1\) field 'vc'"),
    ((data.StructLayout({"vc": 2, "x": 4}), 2), {"vcs": 2}, TypeError, "field 'vc'"),
])
def test_bad_parameters_are_refused(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        CreditSignature(*args, **kwargs)


def test_the_ends_check_their_parameters():
    with pytest.raises(ValueError, match="max_take"):
        CreditSender(8, 4, max_take=-1)
    with pytest.raises(ValueError, match="depth"):
        CreditReceiver(8, 0)
    tx = CreditSender(FLIT, (8, 4), vcs=2, max_take=2)
    assert data.Layout.cast(tx.take.shape()).size == 4
    rx = CreditReceiver(FLIT, (8, 4), vcs=2)
    assert len(rx.o) == 2
