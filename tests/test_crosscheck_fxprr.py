"""ns-3's NewReno recovery in the cross-check (``fxcc::FxPrr`` in ``ns3_run.py``) computes what Linux's
``tcp_cwnd_reduction`` computes, on ns-3's own scoreboard.

A scripted NewReno recovery on a real ns-3 ``TcpTxBuffer`` (the socket's call order: a duplicate ACK
adds a Reno mark before ``DoRecovery``; the third one also flags the head lost before ``EnterRecovery``
and the fast retransmission; a partial ACK discards, flags the new head lost, ``DoRecovery``, then
ns-3 retransmits the head without looking at the window), new data sent while the pipe is below cwnd.
Every cwnd FxPrr sets is checked against RFC 6937 as Linux does it: DeliveredData is one segment per
duplicate ACK that added a mark and ``max(newly acked - marks, 1)`` per partial ACK (the marked
segments were counted at their duplicate ACKs), the pipe is the buffer's after the ACK, prior cwnd as
RecoverFS, no extra segment on a partial ACK (it marks the new head lost). Runs in a subprocess (ns-3
keeps global state; import and compilation take ~10 s); skipped without the ns3 wheel.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest

DRIVER = r"""
import json, sys
import cppyy
from ns import ns
from paccp.crosscheck.ns3_run import CPP
cppyy.cppdef(CPP)
cppyy.cppdef(r'''
namespace fxtest {
using namespace ns3;
// events: 0 = duplicate ACK, n > 0 = cumulative ACK of n segments. Per event after the sender's
// response: kind, marks before and after the ACK, pipe after it (before sending), cwnd, prr_out before,
// segments sent.
std::vector<double> Run(std::vector<int> ev, uint32_t nsent, uint32_t cwnd0, uint32_t ss0) {
    const uint32_t seg = 1000;
    Ptr<TcpTxBuffer> tb = CreateObject<TcpTxBuffer>(0);
    tb->SetSegmentSize(seg);
    tb->SetMaxBufferSize(1 << 24);
    tb->Add(Create<Packet>(1 << 23));
    uint32_t next = 0;
    for (uint32_t k = 0; k < nsent; k++, next += seg) tb->CopyFromSequence(seg, SequenceNumber32(next));
    Ptr<TcpSocketState> tcb = CreateObject<TcpSocketState>();
    tcb->m_segmentSize = seg;
    tcb->m_cWnd = cwnd0;
    tcb->m_ssThresh = ss0;
    Ptr<fxcc::FxPrr> fx = CreateObject<fxcc::FxPrr>();
    fx->Bind(tb);
    std::vector<double> out;
    int dups = 0;
    bool inRec = false;
    uint64_t prrOut = 0;
    for (int e : ev) {
        double marks = tb->GetSacked() / double(seg), marksAfter, pipe;
        uint64_t outBefore = prrOut;
        uint32_t sent = 0;
        auto send = [&](SequenceNumber32 s) {
            tb->CopyFromSequence(seg, s);
            if (inRec) { fx->UpdateBytesSent(seg); prrOut += seg; }
            sent++;
        };
        if (e == 0) {
            tb->AddRenoSack();
            marksAfter = tb->GetSacked() / double(seg);
            if (!inRec && ++dups == 3) {
                tb->MarkHeadAsLost();
                inRec = true;
                pipe = tb->BytesInFlight() / double(seg);
                fx->EnterRecovery(tcb, 3, 0, 0);
                send(tb->HeadSequence());  // the fast retransmission
            } else {
                pipe = tb->BytesInFlight() / double(seg);
                if (inRec) fx->DoRecovery(tcb, 0, true);
            }
        } else {
            tb->DiscardUpTo(tb->HeadSequence() + e * seg);
            tb->MarkHeadAsLost();
            marksAfter = tb->GetSacked() / double(seg);
            pipe = tb->BytesInFlight() / double(seg);
            fx->DoRecovery(tcb, e * seg, false);
            send(tb->HeadSequence());  // ns-3 retransmits the new head at once
        }
        while (tb->BytesInFlight() + seg <= tcb->m_cWnd.Get()) { send(SequenceNumber32(next)); next += seg; }
        for (double v : {double(e), marks, marksAfter, pipe, tcb->m_cWnd.Get() / double(seg),
                         outBefore / double(seg), double(sent)}) out.push_back(v);
    }
    return out;
}
}
''')
case = json.loads(sys.argv[1])
r = list(cppyy.gbl.fxtest.Run(case["events"], case["sent"], case["cwnd"] * 1000, case["ss"] * 1000))
print(json.dumps([r[i:i + 7] for i in range(0, len(r), 7)]))
"""


def _run(case: dict) -> list[list[float]]:
    res = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(case)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rows: list[list[float]] = json.loads(res.stdout.strip().splitlines()[-1])
    return rows


def _linux_cwnd(rows: list[list[float]], prior: float, ss: float) -> list[float]:
    """Linux's tcp_cwnd_reduction (RFC 6937) on the recovery's ACKs (from the third duplicate ACK on)."""
    want, got, dups = [], 0.0, 0
    for kind, marks, marks_after, pipe, _cwnd, out, _sent in rows:
        if kind == 0:
            dups += 1
            if dups < 3:
                continue
            delivered = marks_after - marks  # the mark it added, if any (Linux tcp_add_reno_sack)
            if delivered == 0:
                want.append(want[-1])  # nothing delivered: cwnd unchanged
                continue
        else:
            delivered = max(kind - marks, 1.0)  # Linux tcp_remove_reno_sacks
        got += delivered
        if pipe > ss:
            sndcnt = math.ceil(got * ss / prior - 1e-9) - out
        else:
            sndcnt = min(ss - pipe, max(got - out, delivered))
        want.append(pipe + max(sndcnt, 0.0 if out > 0 else 1.0))
    return want


NO_NS3 = importlib.util.find_spec("ns") is None


@pytest.mark.skipif(NO_NS3, reason="the ns3 wheel is not installed")
@pytest.mark.parametrize(
    ("events", "sent", "cwnd", "ss"),
    [
        # 60 segments out, cwnd 60, ssthresh 30: 20 duplicate ACKs (proportional phase), partial ACKs of
        # one segment (the next one lost too), one of 8 (covering marked segments), more duplicates
        ([0] * 20 + [1, 0, 1, 0, 1, 1, 0, 0, 1, 8, 0, 1, 0, 1, 0], 60, 60, 30),
        # ssthresh 4 (as after repeated halvings): the pipe falls below it, the slow-start reduction bound
        ([0] * 16 + [1, 0] * 6 + [1] * 4 + [5, 0, 0, 1], 20, 20, 4),
    ],
)
def test_fxprr_is_linux_prr_on_ns3s_reno_scoreboard(events: list[int], sent: int, cwnd: int, ss: int) -> None:
    rows = _run({"events": events, "sent": sent, "cwnd": cwnd, "ss": ss})
    assert [r[4] for r in rows[2:]] == pytest.approx(_linux_cwnd(rows, cwnd, ss))
    # the duplicate ACKs after the entry (proportional phase) send ssthresh / RecoverFS per segment
    steps = rows[3 : events.index(1)]
    assert sum(r[6] for r in steps) == pytest.approx(len(steps) * ss / cwnd, abs=1)
    # below ssthresh the window never exceeds it (no burst above ssthresh after a partial ACK)
    assert all(r[4] <= ss for r in rows[3:] if r[3] <= ss)
