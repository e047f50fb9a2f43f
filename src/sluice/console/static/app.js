// The console's pages, one per route (#/, #/topics, #/topics/NAME, #/topics/NAME/P,
// #/groups, #/groups/ID, #/metrics), each drawn from the JSON API.

import { api, enc } from "./api.js";
import { LineChart } from "./charts.js";
import { bytes, card, errorBox, h, table } from "./dom.js";
import { render } from "./records.js";

const main = document.getElementById("main");
let generation = 0; // bumped on every navigation: a stale page stops drawing
let timer = null;

function show(gen, ...children) {
  if (gen === generation) main.replaceChildren(...children);
}

function link(href, text) {
  return h("a", { href }, text);
}

function when(ms) {
  return ms >= 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "–";
}

// -- overview ---------------------------------------------------------------------------

async function overview(gen) {
  const c = await api("cluster");
  show(gen,
    h("h1", {}, "Cluster"),
    h("div", { className: "cards" },
      card("Cluster id", c.cluster_id, "cluster-id"),
      card("Controller", c.controller_id, "controller-id"),
      card("Brokers", c.brokers.length, "broker-count"),
      card("This broker", c.broker_id, "broker-id"),
      card("Version", `Sluice ${c.version}`, "version")),
    h("h2", {}, "Brokers"),
    table(["Id", "Host", "Port", "Rack", "Role"], c.brokers.map((b) => [
      b.id, b.host, b.port, b.rack ?? "–",
      b.id === c.controller_id ? h("span", { className: "tag" }, "controller") : ""]),
    { id: "brokers" }));
}

// -- topics -----------------------------------------------------------------------------

async function topics(gen, internal = false) {
  const data = await api(`topics?internal=${internal}`);
  const message = h("div", { id: "create-topic-message" });
  const name = h("input", { id: "new-topic-name", required: true, placeholder: "name" });
  const partitions = h("input", { id: "new-topic-partitions", type: "number", min: 1,
    placeholder: "broker default" });
  const replication = h("input", { id: "new-topic-replication", type: "number", min: 1,
    placeholder: "broker default" });
  const form = h("form", { className: "inline", id: "create-topic-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const orDefault = (input) => (input.value.trim() === "" ? -1 : Number(input.value));
      await api("topics", { method: "POST", body: { name: name.value.trim(),
        partitions: orDefault(partitions), replication_factor: orDefault(replication) } });
      await topics(gen, internal);
      const note = document.getElementById("create-topic-message");
      if (note) note.replaceChildren(h("div", { className: "notice" }, `Created ${name.value}`));
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  } },
  h("label", {}, "Name", name), h("label", {}, "Partitions", partitions),
  h("label", {}, "Replication factor", replication),
  h("button", { type: "submit", id: "create-topic" }, "Create topic"));
  const toggle = h("input", { type: "checkbox", id: "show-internal", checked: internal,
    onchange: () => topics(gen, toggle.checked) });
  show(gen,
    h("h1", {}, "Topics"),
    h("div", { className: "panel" }, h("strong", {}, "New topic"), form, message),
    h("label", { className: "muted" }, h("span", {}, toggle, " show internal topics")),
    table(["Topic", { label: "Partitions", num: true }, { label: "Replication", num: true },
      { label: "Under-replicated", num: true }, { label: "Size", num: true }],
    data.topics.map((t) => [link(`#/topics/${enc(t.name)}`, t.name), t.partitions,
      t.replication_factor,
      t.under_replicated ? h("span", { className: "tag bad" }, t.under_replicated) : 0,
      bytes(t.size_bytes)]), { id: "topics-table" }));
}

async function topic(gen, name) {
  const t = await api(`topics/${enc(name)}`);
  const message = h("div", {});
  const configName = h("input", { id: "config-name", placeholder: "retention.ms" });
  const configValue = h("input", { id: "config-value", placeholder: "value" });
  const alter = async (body) => {
    try {
      await api(`topics/${enc(name)}/configs`, { method: "POST", body });
      await topic(gen, name);
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  };
  const configs = t.configs === null
    ? h("p", { className: "muted" }, "Not allowed to describe this topic's configs.")
    : table(["Config", "Value", "Source", ""], t.configs.map((c) => [c.name,
      c.sensitive ? "(hidden)" : c.value ?? "null", c.source,
      c.source === "DYNAMIC_TOPIC_CONFIG"
        ? h("button", { className: "link", onclick: () => alter({ delete: [c.name] }) }, "reset")
        : ""]), { id: "configs-table" });
  const remove = h("button", { className: "danger", id: "delete-topic", onclick: async () => {
    if (!window.confirm(`Delete topic ${name} and all its records?`)) return;
    try {
      await api(`topics/${enc(name)}`, { method: "DELETE" });
      window.location.hash = "#/topics";
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  } }, "Delete topic");
  show(gen,
    h("h1", {}, `Topic ${t.name}`, t.internal ? h("span", { className: "tag" }, " internal") : ""),
    message,
    h("h2", {}, "Partitions"),
    table([{ label: "Partition", num: true }, { label: "Leader", num: true }, "Replicas", "ISR",
      { label: "Start offset", num: true }, { label: "End offset", num: true },
      { label: "Size", num: true }, ""],
    t.partitions.map((p) => [p.partition, p.leader, p.replicas.join(", "), p.isr.join(", "),
      p.start_offset ?? "–", p.end_offset ?? "–", bytes(p.size_bytes),
      link(`#/topics/${enc(name)}/${p.partition}`, "browse records")]),
    { id: "partitions-table" }),
    h("h2", {}, "Configs"),
    h("form", { className: "inline", id: "alter-config-form", onsubmit: (e) => {
      e.preventDefault();
      alter({ set: { [configName.value.trim()]: configValue.value } });
    } }, h("label", {}, "Config", configName), h("label", {}, "Value", configValue),
    h("button", { type: "submit", id: "set-config" }, "Set")),
    configs,
    h("h2", {}, "Danger zone"), remove);
}

// -- records ----------------------------------------------------------------------------

async function records(gen, name, partition, limit = 20, view = "utf8") {
  const data = await api(`topics/${enc(name)}/partitions/${partition}/records?limit=${limit}`);
  const limitSelect = h("select", { id: "record-limit", onchange: () =>
    records(gen, name, partition, limitSelect.value, viewSelect.value) },
  [10, 20, 50, 100, 200].map((n) => h("option", { value: n, selected: n === Number(limit) }, n)));
  const viewSelect = h("select", { id: "record-view", onchange: () =>
    records(gen, name, partition, limitSelect.value, viewSelect.value) },
  [["utf8", "UTF-8"], ["json", "JSON"], ["hex", "Hex"]].map(([value, label]) =>
    h("option", { value, selected: value === view }, label)));
  const payload = (field) => h("pre", { className: "payload" }, render(field, view));
  const rows = data.records.slice().reverse().map((r) => [r.offset, when(r.timestamp),
    payload(r.key), payload(r.value),
    h("div", {}, r.headers.map((x) => h("div", {}, h("strong", {}, `${x.key}: `),
      render(x.value, view === "hex" ? "hex" : "utf8"))))]);
  show(gen,
    h("h1", {}, link(`#/topics/${enc(name)}`, name), ` / partition ${partition}`),
    h("p", { className: "muted", id: "record-range" },
      `Offsets ${data.start_offset} to ${data.end_offset}: the newest ${data.records.length} records, newest first.`),
    h("form", { className: "inline" }, h("label", {}, "Records", limitSelect),
      h("label", {}, "View as", viewSelect),
      h("button", { type: "button", onclick: () => records(gen, name, partition, limit, view) },
        "Refresh")),
    h("h2", {}, ""),
    table([{ label: "Offset", num: true }, "Timestamp", "Key", "Value", "Headers"], rows,
      { id: "records-table" }));
}

// -- groups -----------------------------------------------------------------------------

async function groups(gen) {
  const data = await api("groups");
  show(gen,
    h("h1", {}, "Consumer groups"),
    data.groups.length === 0 ? h("p", { className: "muted" }, "No groups.") : "",
    table(["Group", "State", "Protocol type", { label: "Members", num: true }],
      data.groups.map((g) => [link(`#/groups/${enc(g.group_id)}`, g.group_id), g.state,
        g.protocol_type || "–", g.members ?? "–"]), { id: "groups-table" }));
}

async function group(gen, id) {
  const g = await api(`groups/${enc(id)}`);
  const message = h("div", { id: "reset-result" });
  const to = h("select", { id: "reset-to" },
    ["earliest", "latest", "offset"].map((v) => h("option", { value: v }, v)));
  const offset = h("input", { id: "reset-offset", type: "number", min: 0, value: 0 });
  const topicsCommitted = [...new Set(g.offsets.map((o) => o.topic))];
  const topicSelect = h("select", { id: "reset-topic" }, h("option", { value: "" }, "all topics"),
    topicsCommitted.map((t) => h("option", { value: t }, t)));
  const form = h("form", { className: "inline", id: "reset-form", onsubmit: async (e) => {
    e.preventDefault();
    const body = { to: to.value };
    if (to.value === "offset") body.offset = Number(offset.value);
    if (topicSelect.value) body.topic = topicSelect.value;
    try {
      const result = await api(`groups/${enc(id)}/offsets`, { method: "POST", body });
      await group(gen, id);
      const note = document.getElementById("reset-result");
      if (note) note.replaceChildren(h("div", { className: "notice" },
        `Reset ${result.offsets.length} partitions to ${to.value}`));
    } catch (error) {
      message.replaceChildren(errorBox(error));
    }
  } }, h("label", {}, "To", to), h("label", {}, "Offset", offset),
  h("label", {}, "Topic", topicSelect),
  h("button", { type: "submit", id: "reset-offsets" }, "Reset offsets"));
  const totalLag = g.offsets.reduce((sum, o) => sum + (o.lag ?? 0), 0);
  show(gen,
    h("h1", {}, `Group ${g.group_id}`),
    h("div", { className: "cards" }, card("State", g.state, "group-state"),
      card("Members", g.members.length), card("Protocol", g.protocol || "–"),
      card("Total lag", totalLag, "group-lag")),
    h("h2", {}, "Members"),
    table(["Member", "Client id", "Host", "Assignment"], g.members.map((m) => [m.member_id,
      m.client_id, m.host, m.assignment.map((a) => `${a.topic}-${a.partition}`).join(", ")]),
    { id: "members-table" }),
    h("h2", {}, "Offsets and lag"),
    table(["Topic", { label: "Partition", num: true }, { label: "Committed", num: true },
      { label: "End offset", num: true }, { label: "Lag", num: true }],
    g.offsets.map((o) => [o.topic, o.partition, o.committed, o.end_offset ?? "–", o.lag ?? "–"]),
    { id: "offsets-table" }),
    h("h2", {}, "Reset offsets"),
    h("p", { className: "muted" }, "Only while the group has no members (state Empty)."),
    form, message);
}

// -- metrics ----------------------------------------------------------------------------

function seriesOf(points, pick) {
  const names = new Set();
  points.forEach((p) => Object.keys(pick(p) || {}).forEach((k) => names.add(k)));
  return [...names].sort().map((name) => ({
    name: name || "all",
    points: points.filter((p) => pick(p) && name in pick(p)).map((p) => [p.t, pick(p)[name]]),
  }));
}

async function metrics(gen) {
  const status = h("p", { className: "muted", id: "metrics-status" }, "");
  const charts = {
    messages: new LineChart("Messages in", "/s"),
    bytes: new LineChart("Bytes in and out", "B/s"),
    latency: new LineChart("Request time (mean)", "ms"),
    purgatory: new LineChart("Purgatory size", "ops"),
    timer: new LineChart("Timer size (delayed operations)", "ops"),
  };
  show(gen, h("h1", {}, "Metrics"), status,
    h("div", { className: "charts", id: "charts" }, Object.values(charts).map((c) => c.element)));
  const tick = async () => {
    if (gen !== generation) return;
    try {
      const data = await api("metrics");
      const missing = new Set(data.missing);
      status.textContent = data.available
        ? "This broker's Prometheus registry, sampled every 2 s while this page is open."
        : "metrics not available";
      const gone = (...keys) => (keys.every((k) => missing.has(k)) ? "metrics not available" : "");
      const p = data.points;
      charts.messages.draw([{ name: "messages in", points: p.filter((x) => "messages_in_per_s" in x)
        .map((x) => [x.t, x.messages_in_per_s]) }], gone("messages_in"));
      charts.bytes.draw([
        { name: "in", points: p.filter((x) => "bytes_in_per_s" in x).map((x) => [x.t, x.bytes_in_per_s]) },
        { name: "out", points: p.filter((x) => "bytes_out_per_s" in x).map((x) => [x.t, x.bytes_out_per_s]) },
      ], gone("bytes_in", "bytes_out"));
      charts.latency.draw(seriesOf(p, (x) => x.request_time_ms), gone("request_time"));
      charts.purgatory.draw(seriesOf(p, (x) => x.purgatory_size), gone("purgatory_size"));
      charts.timer.draw(seriesOf(p, (x) => x.timer_size), gone("timer_size"));
    } catch (error) {
      status.replaceChildren(errorBox(error));
    }
    if (gen === generation) timer = setTimeout(tick, 2000);
  };
  await tick();
}

// -- routing ----------------------------------------------------------------------------

async function route() {
  generation += 1;
  const gen = generation;
  clearTimeout(timer);
  const parts = window.location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = parts[0] || "overview";
  document.querySelectorAll("header nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.page === page));
  try {
    if (page === "topics" && parts.length === 3) await records(gen, parts[1], Number(parts[2]));
    else if (page === "topics" && parts[1]) await topic(gen, parts[1]);
    else if (page === "topics") await topics(gen);
    else if (page === "groups" && parts[1]) await group(gen, parts[1]);
    else if (page === "groups") await groups(gen);
    else if (page === "metrics") await metrics(gen);
    else await overview(gen);
  } catch (error) {
    show(gen, h("h1", {}, "Error"), errorBox(error));
  }
}

async function whoami() {
  try {
    const s = await api("session");
    document.getElementById("whoami").textContent = s.login_required
      ? `${s.user} · ${s.listener}` : `no login · ${s.listener} (${s.security_protocol})`;
  } catch {
    // the page says what failed
  }
}

window.addEventListener("hashchange", route);
whoami().then(route);
