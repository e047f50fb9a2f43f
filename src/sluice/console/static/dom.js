// Building the page from data without ever parsing it as HTML.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "className") element.className = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function table(headers, rows, attributes = {}) {
  const head = h("tr", {}, headers.map((x) => h("th", { className: x.num ? "num" : "" }, x.label ?? x)));
  const body = rows.map((cells) =>
    h("tr", {}, cells.map((cell, i) => h("td", { className: headers[i].num ? "num" : "" }, cell))));
  return h("table", attributes, h("thead", {}, head), h("tbody", {}, body));
}

export function card(label, value, id) {
  return h("div", { className: "card" }, h("div", { className: "label" }, label),
    h("div", { className: "value", id }, value ?? "–"));
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function errorBox(error) {
  return h("div", { className: "error", role: "alert" }, String(error.message ?? error));
}
