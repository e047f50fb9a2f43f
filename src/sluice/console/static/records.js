// A record field (key, value, header value) as UTF-8, JSON or hex.

export function decode(field) {
  if (!field) return null;
  const binary = atob(field.base64);
  const data = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) data[i] = binary.charCodeAt(i);
  return data;
}

export function hexdump(data) {
  const lines = [];
  for (let at = 0; at < data.length; at += 16) {
    const row = data.subarray(at, at + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const text = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${text}`);
  }
  return lines.join("\n");
}

export function render(field, view) {
  if (!field) return "null";
  const data = decode(field);
  const cut = field.truncated ? `\n… ${field.size} bytes in all` : "";
  if (view === "hex") return hexdump(data) + cut;
  const text = new TextDecoder("utf-8").decode(data);
  if (view === "json") {
    try {
      return JSON.stringify(JSON.parse(text), null, 2) + cut;
    } catch {
      return `(not JSON) ${text}${cut}`;
    }
  }
  return text + cut;
}
