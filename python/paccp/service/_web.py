"""The tenant's web page, served by the controller at ``/``: one static page that talks to the API.

The token is typed in once and kept in the browser's sessionStorage; it travels only in the Authorization
header (never in a URL, so never in an access log). Live quote while typing a pair, buy/change/cancel,
each VM's last reported rate against its purchase with a small chart over the last minutes, invoices.
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>PACCP - bandwidth</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:60em;color:#222}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.4em}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
input,select,button{font:inherit;margin:.15em} #err{color:#b00} .num{text-align:right}
svg{border:1px solid #ccc;background:#fafafa}
</style></head><body>
<h1>PACCP: bandwidth for your VMs</h1>
<div id="login">API token <input id="token" type="password" size="50">
<button id="go" onclick="login()">Open</button></div>
<p id="err"></p>
<div id="main" hidden>
<p id="who"></p>
<h2>Buy or change a pair</h2>
<form onsubmit="doBuy(event)">
VM <select id="vm"></select>
class <select id="cos" onchange="liveQuote()"><option>be</option><option>ds</option>
<option selected>mrg</option></select>
theta <input id="theta" value="100Mbit" size="9" oninput="liveQuote()">
omega <input id="omega" value="2" size="4" oninput="liveQuote()">
port (FBP) <input id="port" size="5">
<button id="buy" type="submit">Buy</button>
</form>
<p>Quote: <b id="quote">-</b></p>
<h2>Your VMs: rate against purchase</h2>
<table id="vms"><thead><tr><th>VM</th><th>host</th><th>purchase</th><th>theta</th><th>omega</th>
<th>per hour</th><th>rate now</th><th></th></tr></thead><tbody></tbody></table>
<svg id="chart" width="640" height="180"></svg>
<h2>Invoice <input id="period" size="7"> <button onclick="invoice()">Show</button></h2>
<table id="inv"><thead><tr><th>VM</th><th>class</th><th>item</th><th>quantity</th><th>amount</th></tr></thead>
<tbody></tbody></table><p id="total"></p>
</div>
<script>
let TOKEN = sessionStorage.getItem("paccp_token") || "";
let quoted = null, quoteSeq = 0; const hist = {};
function mbit(b){ return b == null ? "-" : (b/1e6).toFixed(1) + " Mbit/s"; }
function esc(s){ const d = document.createElement("div"); d.textContent = String(s); return d.innerHTML; }
async function api(method, path, body){
  const r = await fetch(path, {method, headers: {"Authorization": "Bearer " + TOKEN,
    "Content-Type": "application/json"}, body: body ? JSON.stringify(body) : undefined});
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.status);
  return j;
}
function show(e){ document.getElementById("err").textContent = e ? String(e.message || e) : ""; }
async function login(){
  const t = document.getElementById("token").value.trim(); if (t) TOKEN = t;
  try { const me = await api("GET", "/v1/me"); sessionStorage.setItem("paccp_token", TOKEN);
    document.getElementById("who").textContent = "tenant " + me.tenant + ", " + me.model.toUpperCase()
      + ", prices in " + me.currency + " (" + me.book + " book)";
    document.getElementById("main").hidden = false; document.getElementById("login").hidden = true;
    const d = new Date(); document.getElementById("period").value =
      d.getUTCFullYear() + "-" + String(d.getUTCMonth() + 1).padStart(2, "0");
    show(null); await refresh(true); liveQuote(); setInterval(refresh, 1000);
  } catch(e){ show(e); }
}
async function liveQuote(){
  const q = new URLSearchParams({cos: cos.value, theta: theta.value, omega: omega.value});
  const mine = ++quoteSeq;  // answers may come back out of order: only the latest counts
  try { const got = await api("GET", "/v1/quote?" + q); if (mine !== quoteSeq) return; quoted = got;
    document.getElementById("quote").textContent = quoted.per_hour + " " + quoted.currency + " per hour";
    show(null);
  } catch(e){ if (mine !== quoteSeq) return;
    quoted = null; document.getElementById("quote").textContent = "-"; show(e); }
}
async function doBuy(ev){
  ev.preventDefault(); if (!quoted) return;
  const vmName = document.getElementById("vm").value;
  const body = {cos: cos.value, theta: theta.value, omega: omega.value, max_per_hour: quoted.per_hour};
  try {
    const vms = await api("GET", "/v1/vms"); const v = vms.find(x => x.name === vmName);
    const portv = document.getElementById("port").value.trim();
    const same = v && v.purchases.find(p => portv ? p.port === Number(portv) : p.port === null);
    if (same) await api("PATCH", "/v1/purchases/" + same.id, body);
    else await api("POST", "/v1/purchases", Object.assign({vm: vmName}, body,
                   portv ? {port: Number(portv)} : {}));
    show(null); await refresh(false);
  } catch(e){ show(e); }
}
async function cancelP(id){ try { await api("DELETE", "/v1/purchases/" + id); await refresh(false); }
  catch(e){ show(e); } }
async function refresh(first){
  let vms; try { vms = await api("GET", "/v1/vms"); } catch(e){ show(e); return; }
  const sel = document.getElementById("vm");
  if (first || sel.options.length !== vms.length)
    sel.innerHTML = vms.map(v => "<option>" + esc(v.name) + "</option>").join("");
  const rows = [];
  for (const v of vms){
    (hist[v.name] = hist[v.name] || []).push(v.rate_bps || 0);
    if (hist[v.name].length > 120) hist[v.name].shift();
    const ps = v.purchases.length ? v.purchases : [null];
    for (const p of ps) rows.push("<tr class='vmrow' data-vm='" + esc(v.name) + "'><td>" + esc(v.name)
      + "</td><td>" + esc(v.host) + "</td><td>" + (p ? "#" + p.id + " " + p.cos.toUpperCase()
      + (p.port ? " port " + p.port : "") : "none (BE)") + "</td><td class=num>"
      + (p ? mbit(p.theta_bps) : "-") + "</td><td class=num>" + (p ? p.omega : "1")
      + "</td><td class=num>" + (p ? p.per_hour + " " + p.currency : "-") + "</td><td class='num rate'>"
      + mbit(v.rate_bps) + "</td><td>" + (p ? "<button onclick='cancelP(" + p.id + ")'>cancel</button>"
      : "") + "</td></tr>");
  }
  document.querySelector("#vms tbody").innerHTML = rows.join("");
  draw(vms);
}
function draw(vms){
  const svg = document.getElementById("chart"); const W = 640, H = 180;
  let top = 1e6; for (const v of vms){ for (const x of hist[v.name]) top = Math.max(top, x);
    for (const p of v.purchases) top = Math.max(top, p.theta_bps); }
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]; let out = "";
  vms.forEach((v, i) => { const c = colors[i % colors.length]; const h = hist[v.name];
    const pts = h.map((x, k) => (W - (h.length - 1 - k) * (W / 120)) + "," + (H - 10 - x / top * (H - 20)));
    out += "<polyline fill='none' stroke='" + c + "' stroke-width='2' points='" + pts.join(" ") + "'/>";
    for (const p of v.purchases) if (p.theta_bps > 0){ const y = H - 10 - p.theta_bps / top * (H - 20);
      out += "<line x1='0' x2='" + W + "' y1='" + y + "' y2='" + y + "' stroke='" + c
        + "' stroke-dasharray='4 3'/>"; }
    out += "<text x='6' y='" + (14 + 14 * i) + "' fill='" + c + "'>" + esc(v.name) + "</text>"; });
  svg.innerHTML = out;
}
async function invoice(){
  try { const inv = await api("GET", "/v1/invoices/" + document.getElementById("period").value);
    document.querySelector("#inv tbody").innerHTML = inv.lines.map(l => "<tr><td>" + esc(l.vm)
      + "</td><td>" + esc(l.cos) + "</td><td>" + esc(l.description) + "</td><td class=num>"
      + esc(l.quantity + " " + l.unit) + "</td><td class=num>" + esc(l.amount) + "</td></tr>").join("");
    document.getElementById("total").textContent = "Total " + inv.total + " " + inv.currency
      + " (" + inv.records + " usage records)"; show(null);
  } catch(e){ show(e); }
}
const cos = document.getElementById("cos"), theta = document.getElementById("theta"),
      omega = document.getElementById("omega");
if (TOKEN) login();
</script></body></html>
"""
