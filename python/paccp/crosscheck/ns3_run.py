"""Run one cross-check scenario on ns-3 (the ``ns3`` wheel's Python bindings, C++ callbacks via cppyy).

Usage (a subprocess of :mod:`paccp.crosscheck.run`, because importing ns-3 takes tens of seconds and the
simulator keeps global state): ``python -m paccp.crosscheck.ns3_run SPEC.json OUT.json``.

The topology is built link by link from the neutral spec (:mod:`paccp.crosscheck.scenarios`):
point-to-point links (``DataRate``, ``Delay``), one ``DropTailQueue`` per direction, **no queue disc**
(the traffic-control layer's default fq_codel is uninstalled, so a full device queue drops silently,
counted by the queue's drop counter). ns-3's device queue holds the packets *waiting* to be serialised,
the engine's limit also counts the one being serialised: an engine buffer of B packets is an ns-3 queue of
B - 1. Every flow gets its own source and destination /32 address (aliases on the hosts' interfaces) and
static host routes along the paths the engine chose for the data and for the ACKs (``ack_path``; the
engine hashes an ACK's next hops independently, so on a leaf-spine it mostly takes another spine; without
``ack_path`` the ACKs take the reverse path), so both simulators use the same routes even under ECMP.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

CPP = r"""
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/internet-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"
#include <array>
#include <map>
#include <vector>
namespace fxcc {
using namespace ns3;
struct Rec {
    uint64_t size = 0;        // 0 = long-lived
    double tStart = -1, tConn = -1, tDone = -1;
    // tData: the data may start (tStart + the handshake lead); tDataOn: they did; tLastAck: snd_una moved
    double tData = -1, tDataOn = -1, tLastAck = -1;
    bool dataOn = false;
    uint64_t highTx = 0, retx = 0, rto = 0, recov = 0, acked = 0, ackedAtWarm = 0, ackedAtEnd = 0;
    uint64_t newInRecovery = 0, maxNewInRecovery = 0;
    uint64_t dataDrops = 0, rtxDrops = 0;  // this flow's dropped data segments; of them, retransmissions
    std::map<uint64_t, uint32_t> rtxSent;  // retransmissions by sequence number, not yet seen dropped
    double stalled = 0;  // summed time from the last cumulative ACK advance to each retransmission timeout
    int state = 0;
    Ptr<Socket> sock;
};
std::vector<Rec> recs;
std::vector<Ptr<Queue<Packet>>> queues;
std::vector<uint64_t> qBytesWarm, qBytesEnd;

void Fill(uint32_t i, Ptr<Socket> s, uint32_t) {
    Rec &r = recs[i];
    if (r.size != 0 || !r.dataOn) return;
    while (s->GetTxAvailable() >= 65536) { s->Send(Create<Packet>(65536)); }
}
void StartData(uint32_t i) {
    Rec &r = recs[i];
    r.dataOn = true;
    r.tDataOn = Simulator::Now().GetSeconds();
    if (r.size > 0) { r.sock->Send(Create<Packet>(r.size)); } else { Fill(i, r.sock, 0); }
}
// The data start at tData (the engine's start, see handshake_lead_ns) or at the establishment if later.
void OnConn(uint32_t i, Ptr<Socket> s) {
    Rec &r = recs[i];
    r.tConn = Simulator::Now().GetSeconds();
    Time wait = Seconds(r.tData) - Simulator::Now();
    if (wait.IsStrictlyPositive()) { Simulator::Schedule(wait, &StartData, i); } else { StartData(i); }
}
void OnFail(uint32_t i, Ptr<Socket> s) { }
void OnTx(uint32_t i, Ptr<const Packet> p, const TcpHeader &h, Ptr<const TcpSocketBase> so) {
    Rec &r = recs[i];
    uint32_t len = p->GetSize();
    if (len == 0) return;
    uint64_t seq = h.GetSequenceNumber().GetValue();
    if (seq < r.highTx) { r.retx++; r.rtxSent[seq]++; }
    else { if (r.state == 3) { r.newInRecovery++; } r.highTx = seq + len; }
}
void OnState(uint32_t i, TcpSocketState::TcpCongState_t o, TcpSocketState::TcpCongState_t n) {
    Rec &r = recs[i];
    if (n == TcpSocketState::CA_LOSS && o != TcpSocketState::CA_LOSS) {
        r.rto++;
        if (r.tLastAck >= 0) r.stalled += Simulator::Now().GetSeconds() - r.tLastAck;
    }
    if (n == TcpSocketState::CA_RECOVERY && o != TcpSocketState::CA_RECOVERY) {
        r.recov++;
        r.newInRecovery = 0;
    }
    if (o == TcpSocketState::CA_RECOVERY && n != TcpSocketState::CA_RECOVERY) {
        if (r.newInRecovery > r.maxNewInRecovery) r.maxNewInRecovery = r.newInRecovery;
    }
    r.state = n;
}
void OnRto(uint32_t i, Time, Time) {}
void OnAck(uint32_t i, SequenceNumber32 o, SequenceNumber32 n) {
    Rec &r = recs[i];
    uint64_t a = n.GetValue() > 0 ? n.GetValue() - 1 : 0;
    r.acked = a;
    r.tLastAck = Simulator::Now().GetSeconds();
    if (r.size > 0 && a >= r.size && r.tDone < 0) {
        r.tDone = Simulator::Now().GetSeconds();
        r.sock->Close();
    }
}
// RFC 6937 PRR for NewReno without SACK on the ns-3 side, as Linux's tcp_cwnd_reduction computes it, on
// ns-3's own scoreboard (the socket's TcpTxBuffer, bound in Start): on every ACK of the recovery
// DeliveredData = the change of snd.una + the change of the bytes marked SACKed (without SACK, ns-3's
// Reno marks: a duplicate ACK adds one if it can, a cumulative ACK removes the ones it covers), pipe =
// the buffer's BytesInFlight *after* the ACK (RFC 6675: sent - SACKed - lost + retransmitted), and
//   pipe > ssthresh: sndcnt = ceil(prr_delivered * ssthresh / RecoverFS) - prr_out (in segments),
//   else (PRR-SSRB):  sndcnt = min(ssthresh - pipe, max(prr_delivered - prr_out, DeliveredData)),
// at least one segment on the first ACK; cwnd = pipe + sndcnt; RecoverFS = the window before the
// decrease (Linux prior_cwnd, as the engine). Linux adds one segment to the SSRB term when the ACK
// advanced snd.una and marked nothing newly lost; in a NewReno recovery a partial ACK always marks the
// new head lost (ns-3 MarkHeadAsLost, Linux tcp_newreno_mark_lost), so never. prr_out counts every
// segment sent in the recovery (UpdateBytesSent), the fast retransmission and the partial-ACK
// retransmissions (which ns-3 sends without checking the window) included.
// ns-3 3.44's TcpPrrRecovery (and the first version of this class) does not: it multiplies
// prr_delivered by ssthresh in 32 bits (ns-3 issue #1282), sets cwnd from the bytes in flight of
// *before* the ACK, adds the Reno-marked segments to DeliveredData twice (once per duplicate ACK, again
// when the cumulative ACK covers them, ns-3's delivered count includes them), stops counting duplicate
// ACKs once prr_delivered reaches RecoverFS, and adds a segment whenever the ACK covered retransmitted
// data; together these sent 3 segments per 2 ACKs in long recoveries (docs/explanation/fidelity.md).
// SACK runs keep 3.44's class (there the bytes in flight are current; its recoveries are short).
class FxPrr : public TcpClassicRecovery {
  public:
    static TypeId GetTypeId() {
        static TypeId tid = TypeId("fxcc::FxPrr")
                                .SetParent<TcpClassicRecovery>()
                                .AddConstructor<FxPrr>()
                                .SetGroupName("Internet");
        return tid;
    }
    FxPrr() = default;
    FxPrr(const FxPrr &o) = default;
    std::string GetName() const override { return "FxPrr"; }
    void Bind(Ptr<TcpTxBuffer> b) { tb = b; }
    void EnterRecovery(Ptr<TcpSocketState> tcb, uint32_t, uint32_t, uint32_t) override {
        NS_ABORT_MSG_IF(!tb, "fxcc::FxPrr is not bound to its socket's TcpTxBuffer");
        int64_t seg = tcb->m_segmentSize;
        out = 0;
        got = 0;
        fs = std::max<int64_t>(tcb->m_cWnd.Get(), seg);
        una = tb->HeadSequence();
        sacked = tb->GetSacked();
        Reduce(tcb, seg);  // the entering duplicate ACK delivered one segment (its Reno mark)
    }
    void DoRecovery(Ptr<TcpSocketState> tcb, uint32_t, bool) override {
        SequenceNumber32 u = tb->HeadSequence();
        int64_t sk = tb->GetSacked();
        int64_t d = static_cast<int64_t>(u - una) + (sk - sacked);
        una = u;
        sacked = sk;
        if (d > 0) Reduce(tcb, d);
    }
    void ExitRecovery(Ptr<TcpSocketState> tcb) override { tcb->m_cWndInfl = tcb->m_cWnd; }
    void UpdateBytesSent(uint32_t b) override { out += b; }
    Ptr<TcpRecoveryOps> Fork() override { return CopyObject<FxPrr>(this); }
  private:
    void Reduce(Ptr<TcpSocketState> tcb, int64_t d) {
        got += d;
        int64_t seg = tcb->m_segmentSize, pipe = tb->BytesInFlight(), ss = tcb->m_ssThresh.Get(), n;
        if (pipe > ss) {
            n = (got * ss + fs * seg - 1) / (fs * seg) * seg - out;  // rounded up to whole segments
        } else {
            n = std::min<int64_t>(ss - pipe, std::max<int64_t>(got - out, d));
        }
        n = std::max<int64_t>(n, out > 0 ? 0 : seg);
        tcb->m_cWnd = static_cast<uint32_t>(pipe + std::max<int64_t>(n, 0));
        tcb->m_cWndInfl = tcb->m_cWnd;
    }
    Ptr<TcpTxBuffer> tb;
    SequenceNumber32 una;
    int64_t out = 0, got = 0, fs = 1, sacked = 0;
};
TypeId FxPrrTypeId() { return FxPrr::GetTypeId(); }
bool bindFxPrr = false;
void UseFxPrr(bool on) { bindFxPrr = on; }
void Start(uint32_t i, Ptr<Node> node, Ipv4Address src, Ipv4Address dst, uint16_t port, uint32_t sndbuf) {
    Rec &r = recs[i];
    r.tStart = Simulator::Now().GetSeconds();
    Ptr<Socket> s = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
    r.sock = s;
    s->SetAttribute("SndBufSize", UintegerValue(sndbuf));
    if (bindFxPrr) {
        Ptr<TcpSocketBase> b = DynamicCast<TcpSocketBase>(s);
        Ptr<FxPrr> fx = CreateObject<FxPrr>();
        fx->Bind(b->GetTxBuffer());
        b->SetRecoveryAlgorithm(fx);
    }
    s->Bind(InetSocketAddress(src, 0));
    s->TraceConnectWithoutContext("Tx", MakeBoundCallback(&OnTx, i));
    s->TraceConnectWithoutContext("CongState", MakeBoundCallback(&OnState, i));
    s->TraceConnectWithoutContext("HighestRxAck", MakeBoundCallback(&OnAck, i));
    s->SetConnectCallback(MakeBoundCallback(&OnConn, i), MakeBoundCallback(&OnFail, i));
    s->SetSendCallback(MakeBoundCallback(&Fill, i));
    s->Connect(InetSocketAddress(dst, port));
}
void Schedule(double t, double tData, uint32_t i, Ptr<Node> node, Ipv4Address src, Ipv4Address dst,
              uint16_t port, uint32_t sndbuf) {
    recs.resize(std::max<size_t>(recs.size(), i + 1));
    recs[i].tData = tData;
    Simulator::Schedule(Seconds(t), &Start, i, node, src, dst, port, sndbuf);
}
void SetSize(uint32_t i, uint64_t size) {
    recs.resize(std::max<size_t>(recs.size(), i + 1));
    recs[i].size = size;
}
void Snap(int which) {
    for (auto &r : recs) { if (which == 0) r.ackedAtWarm = r.acked; else r.ackedAtEnd = r.acked; }
    auto &v = which == 0 ? qBytesWarm : qBytesEnd;
    v.clear();
    for (auto &q : queues) {
        v.push_back(q->GetTotalReceivedBytes() - q->GetTotalDroppedBytes() - q->GetNBytes());
    }
}
void ScheduleSnap(double t, int which) { Simulator::Schedule(Seconds(t), &Snap, which); }
std::map<Ptr<NetDevice>, uint32_t> devIdx;
std::vector<uint64_t> ipTx;
// Per queue and packet kind (0 SYN, 1 SYN-ACK, 2 data, 3 pure ACK): packets IP handed to the interface
// while the device queue was stopped (the traffic-control layer drops them next), and wire bytes of the
// pure ACKs sent. ackWire: wire sizes (IP + 2 bytes PPP) of the pure ACKs leaving their sender.
std::vector<std::array<uint64_t, 4>> kindDrops;
std::vector<uint64_t> ackPkts, ackWireBytes;
std::vector<bool> fromHost;
std::vector<Ptr<NetDeviceQueueInterface>> queueIf;
std::map<uint32_t, uint64_t> ackWire;
struct HsDrop { double t; uint32_t q; int kind; uint32_t flow; };
std::vector<HsDrop> hsDrops;  // every dropped SYN / SYN-ACK
// Without a queue disc the traffic-control layer drops a packet silently when the device queue is stopped
// (full): no trace fires. Such drops = packets IP handed to the interface - packets the device queue took
// or dropped itself; classified here by the queue's state when IP hands the packet over.
void OnIpTx(Ptr<const Packet> p, Ptr<Ipv4> ip, uint32_t ifc) {
    auto it = devIdx.find(ip->GetNetDevice(ifc));
    if (it == devIdx.end()) return;
    uint32_t k = it->second;
    ipTx[k]++;
    Ptr<Packet> c = p->Copy();
    Ipv4Header ih;
    c->RemoveHeader(ih);
    if (ih.GetProtocol() != 6) return;
    TcpHeader th;
    c->PeekHeader(th);
    uint32_t payload = c->GetSize() - 4u * th.GetLength();
    uint8_t fl = th.GetFlags();
    int kind = (fl & TcpHeader::SYN) ? ((fl & TcpHeader::ACK) ? 1 : 0) : (payload > 0 ? 2 : 3);
    if (queueIf[k]->GetTxQueue(0)->IsStopped()) {
        kindDrops[k][kind]++;
        // the flow's /30: 11.b.c.(4 * (i & 63) + 1 or 2), i = b << 14 | c << 6 | (i & 63)
        uint32_t a = ih.GetSource().Get();
        uint32_t f = ((a >> 16) & 255) << 14 | ((a >> 8) & 255) << 6 | ((a & 255) >> 2);
        if (kind < 2) hsDrops.push_back({Simulator::Now().GetSeconds(), k, kind, f});
        if (kind == 2 && f < recs.size()) {
            recs[f].dataDrops++;
            auto rs = recs[f].rtxSent.find(th.GetSequenceNumber().GetValue());
            if (rs != recs[f].rtxSent.end() && rs->second > 0) {
                rs->second--;
                recs[f].rtxDrops++;
            }
        }
    } else if (kind == 3) {
        uint32_t wire = ih.GetSerializedSize() + c->GetSize() + 2;
        ackPkts[k]++;
        ackWireBytes[k] += wire;
        if (fromHost[k]) ackWire[wire]++;
    }
}
uint64_t KindDrops(uint32_t k, int kind) { return kindDrops[k][kind]; }
uint32_t NHsDrops() { return hsDrops.size(); }
HsDrop GetHsDrop(uint32_t j) { return hsDrops[j]; }
std::vector<uint32_t> AckWireKeys() {
    std::vector<uint32_t> v;
    for (auto &kv : ackWire) v.push_back(kv.first);
    return v;
}
uint64_t AckWireCount(uint32_t w) { return ackWire[w]; }
void WatchTc(Ptr<Node> n) {
    n->GetObject<Ipv4L3Protocol>()->TraceConnectWithoutContext("Tx", MakeCallback(&OnIpTx));
}
void AddQueue(Ptr<NetDevice> d, uint32_t pkts, bool host) {
    Ptr<PointToPointNetDevice> p = DynamicCast<PointToPointNetDevice>(d);
    Ptr<Queue<Packet>> q = p->GetQueue();
    q->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, pkts));
    devIdx[d] = queues.size();
    ipTx.push_back(0);
    kindDrops.push_back({0, 0, 0, 0});
    ackPkts.push_back(0);
    ackWireBytes.push_back(0);
    fromHost.push_back(host);
    queueIf.push_back(d->GetObject<NetDeviceQueueInterface>());
    queues.push_back(q);
}
uint64_t QDrops(uint32_t k) {
    return ipTx[k] - queues[k]->GetTotalReceivedPackets();  // includes the queue's own drops
}
}
"""


NS3_RECOVERIES = {
    "prr-fixed": "fxcc::FxPrr",
    "prr": "ns3::TcpPrrRecovery",
    "classic": "ns3::TcpClassicRecovery",
}
"""The spec's ``tcp.ns3_recovery`` choices and ns-3's recovery class for each."""


def timeline(spec: dict[str, Any]) -> dict[str, Any]:
    """ns-3's clock for a spec: the engine's clock shifted by ``handshake_lead_ns`` (default 0).

    Every flow connects at its engine start time on ns-3's clock and sends its first data segment the
    lead later (or at the establishment, if later), so with a lead longer than a handshake the data start
    when the engine's do, relative to each other and to the warm-up and end snapshots, and no handshake
    packet meets the data. Lead 0: connect at the start, data at the establishment (FCT from there).
    """
    lead = int(spec.get("handshake_lead_ns", 0))
    if lead < 0:
        raise ValueError("handshake_lead_ns must be >= 0")
    return {
        "connect_s": [f["start_ns"] / 1e9 for f in spec["flows"]],
        "data_s": [(f["start_ns"] + lead) / 1e9 for f in spec["flows"]],
        "warm_s": (spec["warmup_ns"] + lead) / 1e9,
        "end_s": (spec["duration_ns"] + lead) / 1e9,
    }


def _ns(ns: Any, cppyy: Any, spec: dict[str, Any]) -> dict[str, Any]:
    tcp = spec["tcp"]
    cfg = ns.Config.SetDefault
    cfg("ns3::TcpL4Protocol::SocketType", ns.TypeIdValue(ns.TypeId.LookupByName("ns3::TcpNewReno")))
    # NewReno: the fixed PRR (FxPrr above) unless the spec asks for 3.44's own ("prr") or "classic"
    rec = NS3_RECOVERIES[tcp.get("ns3_recovery", "prr" if tcp["sack"] else "prr-fixed")]
    cppyy.gbl.fxcc.FxPrrTypeId()  # registers the fixed PRR's TypeId
    cppyy.gbl.fxcc.UseFxPrr(rec == "fxcc::FxPrr")  # each sender's FxPrr reads its own socket's scoreboard
    cfg("ns3::TcpL4Protocol::RecoveryType", ns.TypeIdValue(ns.TypeId.LookupByName(rec)))
    cfg("ns3::TcpSocketBase::Sack", ns.BooleanValue(bool(tcp["sack"])))
    cfg("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))
    cfg("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.NanoSeconds(int(tcp["min_rto_ns"]))))
    cfg("ns3::TcpSocketBase::LimitedTransmit", ns.BooleanValue(bool(tcp.get("limited_transmit", True))))
    cfg("ns3::TcpSocket::SegmentSize", ns.UintegerValue(int(tcp["mss"])))
    cfg("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(int(tcp["init_cwnd"])))
    cfg("ns3::TcpSocket::DelAckCount", ns.UintegerValue(1 if not tcp["delayed_ack"] else 2))
    cfg("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.MilliSeconds(40)))
    cfg("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 26))
    cfg("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 22))

    names: list[str] = spec["nodes"]
    idx = {n: i for i, n in enumerate(names)}
    nodes = ns.NodeContainer()
    nodes.Create(len(names))
    ns.InternetStackHelper().Install(nodes)
    for k in range(len(names)):
        cppyy.gbl.fxcc.WatchTc(nodes.Get(k))
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    tch = ns.TrafficControlHelper()
    # per directed channel "a->b": (sending node's ipv4 if index, address of the far end, queue index)
    chan: dict[str, tuple[int, Any, int]] = {}
    qnames: list[str] = []
    iface_of_host: dict[str, int] = {}
    for ln in spec["links"]:
        a, b = ln["a"], ln["b"]
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(ln["rate_bps"]))))
        p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.NanoSeconds(int(ln["delay_ns"]))))
        devs = p2p.Install(nodes.Get(idx[a]), nodes.Get(idx[b]))
        ifc = addr.Assign(devs)
        addr.NewNetwork()
        tch.Uninstall(devs)
        for k, (x, y, pk) in enumerate(((a, b, ln["queue_ab_pkts"]), (b, a, ln["queue_ba_pkts"]))):
            dev = devs.Get(k)
            cppyy.gbl.fxcc.AddQueue(dev, max(1, int(pk) - 1), x in spec["hosts"])
            qnames.append(f"{x}->{y}")
            ipv4 = nodes.Get(idx[x]).GetObject[ns.Ipv4]()
            chan[f"{x}->{y}"] = (ipv4.GetInterfaceForDevice(dev), ifc.GetAddress(1 - k), len(qnames) - 1)
            if x in spec["hosts"]:
                iface_of_host[x] = ipv4.GetInterfaceForDevice(dev)
    srh = ns.Ipv4StaticRoutingHelper()
    port = 9
    tl = timeline(spec)
    any_addr = ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
    sink = ns.PacketSinkHelper("ns3::TcpSocketFactory", any_addr)
    for h in sorted({f["dst"] for f in spec["flows"]}):
        sink.Install(nodes.Get(idx[h])).Start(ns.Seconds(0))
    for i, f in enumerate(spec["flows"]):
        # A /30 per flow: ns-3 picks a socket's source address by route (not by bind), the address of the
        # outgoing interface in the destination's subnet, so the source alias shares the flow's /30.
        base = f"11.{(i >> 14) & 255}.{(i >> 6) & 255}.{(i & 63) * 4}"
        pre = base.rsplit(".", 1)[0]
        src_a = ns.Ipv4Address(f"{pre}.{(i & 63) * 4 + 1}")
        dst_a = ns.Ipv4Address(f"{pre}.{(i & 63) * 4 + 2}")
        for host, a in ((f["src"], src_a), (f["dst"], dst_a)):
            ipv4 = nodes.Get(idx[host]).GetObject[ns.Ipv4]()
            ipv4.AddAddress(iface_of_host[host], ns.Ipv4InterfaceAddress(a, ns.Ipv4Mask("255.255.255.252")))
        path: list[str] = f["path"]
        ack_path: list[str] = f.get("ack_path") or path[::-1]
        for route, to in ((path, dst_a), (ack_path, src_a)):
            for u, v in itertools.pairwise(route):
                ifn, nh, _q = chan[f"{u}->{v}"]
                srh.GetStaticRouting(nodes.Get(idx[u]).GetObject[ns.Ipv4]()).AddHostRouteTo(to, nh, ifn)
        size = f["size_bytes"] or 0
        cppyy.gbl.fxcc.SetSize(i, size)
        sndbuf = max(1 << 20, size + 65536) if size else 1 << 22
        cppyy.gbl.fxcc.Schedule(
            tl["connect_s"][i], tl["data_s"][i], i, nodes.Get(idx[f["src"]]), src_a, dst_a, port, sndbuf
        )
    dur = tl["end_s"]
    cppyy.gbl.fxcc.ScheduleSnap(tl["warm_s"], 0)
    cppyy.gbl.fxcc.ScheduleSnap(dur - 1e-9, 1)
    ns.Simulator.Stop(ns.Seconds(dur))
    ns.Simulator.Run()
    recs = cppyy.gbl.fxcc.recs
    flows = []
    for i, f in enumerate(spec["flows"]):
        r = recs[i]
        flows.append(
            {
                "id": f["id"],
                "size_bytes": f["size_bytes"],
                "start_ns": f["start_ns"],
                "conn_delay_ns": round((r.tConn - r.tStart) * 1e9) if r.tConn >= 0 else None,
                # data started this late after the planned start (a handshake longer than the lead)
                "data_late_ns": round((r.tDataOn - r.tData) * 1e9) if r.tDataOn >= 0 else None,
                "fct_ns": round((r.tDone - r.tDataOn) * 1e9) if r.tDone >= 0 else None,
                "retransmits": int(r.retx),
                "timeouts": int(r.rto),
                "recoveries": int(r.recov),
                "max_new_in_recovery": int(max(r.maxNewInRecovery, r.newInRecovery if r.state == 3 else 0)),
                "acked_window_bytes": int(r.ackedAtEnd - r.ackedAtWarm),
                "acked_bytes": int(r.acked),
                "last_ack_ns": round((r.tLastAck - tl["data_s"][i]) * 1e9) if r.tLastAck >= 0 else None,
                "state_at_end": int(r.state),
                "data_drops": int(r.dataDrops),
                "retransmission_drops": int(r.rtxDrops),
                "stalled_before_rto_ns": round(r.stalled * 1e9),
            }
        )
    fx = cppyy.gbl.fxcc
    kinds = ("syn", "synack", "data", "ack")
    channels = {
        qn: {
            "drops": int(fx.QDrops(k)),
            "tx_bytes": int(fx.qBytesEnd[k]),
            "drops_by_kind": {kd: int(fx.KindDrops(k, j)) for j, kd in enumerate(kinds)},
            "ack_pkts": int(fx.ackPkts[k]),
            "ack_wire_bytes": int(fx.ackWireBytes[k]),
        }
        for k, qn in enumerate(qnames)
    }
    hs = []
    for j in range(fx.NHsDrops()):
        d = fx.GetHsDrop(j)
        hs.append(
            {"t_ns": round(d.t * 1e9), "channel": qnames[d.q], "kind": kinds[d.kind], "flow": int(d.flow)}
        )
    ack_wire = {str(w): int(fx.AckWireCount(w)) for w in fx.AckWireKeys()}
    ns.Simulator.Destroy()
    return {"flows": flows, "channels": channels, "handshake_drops": hs, "ack_wire_sizes": ack_wire}


def main(argv: list[str]) -> None:
    """Entry point: read the spec, run it, write the result JSON."""
    spec = json.loads(Path(argv[1]).read_text())
    import cppyy
    from ns import ns

    cppyy.cppdef(CPP)
    out = _ns(ns, cppyy, spec)
    Path(argv[2]).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
