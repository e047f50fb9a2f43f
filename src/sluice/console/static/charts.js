// Line charts on a <canvas>: time on x, values from 0 on y, legend beside the plot.

import { h } from "./dom.js";

const COLORS = ["#1f5f8b", "#d9480f", "#2b8a3e", "#7048e8", "#c2255c", "#e67700", "#0b7285"];

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function format(value) {
  if (value >= 1e9) return `${(value / 1e9).toFixed(1)}G`;
  if (value >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(1)}k`;
  return value >= 10 || value === 0 ? value.toFixed(0) : value.toFixed(2);
}

export class LineChart {
  constructor(title, unit) {
    this.unit = unit;
    this.canvas = h("canvas", { width: 520, height: 220 });
    this.legend = h("div", { className: "muted" });
    this.element = h("div", { className: "chart" }, h("strong", {}, title), this.canvas,
      this.legend);
  }

  // series: [{ name, points: [[t seconds, value], ...] }]
  draw(series, missingText) {
    const canvas = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 520;
    const height = canvas.clientHeight || 220;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    this.legend.replaceChildren();
    const all = series.flatMap((s) => s.points);
    if (missingText || all.length === 0) {
      g.fillStyle = "#667085";
      g.font = "13px system-ui, sans-serif";
      g.fillText(missingText || "waiting for samples…", 16, height / 2);
      return;
    }
    const left = 52, right = 12, top = 10, bottom = 24;
    const t1 = Math.max(...all.map((p) => p[0]));
    const t0 = Math.min(...all.map((p) => p[0]), t1 - 60);
    const yMax = niceMax(Math.max(...all.map((p) => p[1])));
    const x = (t) => left + ((t - t0) / Math.max(t1 - t0, 1)) * (width - left - right);
    const y = (v) => top + (1 - v / yMax) * (height - top - bottom);
    g.strokeStyle = "#e4e7ec";
    g.fillStyle = "#667085";
    g.font = "11px system-ui, sans-serif";
    g.lineWidth = 1;
    for (let i = 0; i <= 5; i += 1) {
      const value = (yMax * i) / 5;
      g.beginPath(); g.moveTo(left, y(value)); g.lineTo(width - right, y(value)); g.stroke();
      g.fillText(format(value), 4, y(value) + 4);
    }
    for (let i = 0; i <= 4; i += 1) {
      const t = t0 + ((t1 - t0) * i) / 4;
      g.fillText(`-${Math.round(t1 - t)}s`, x(t) - 10, height - 6);
    }
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      g.strokeStyle = color;
      g.lineWidth = 2;
      g.beginPath();
      s.points.forEach(([t, v], j) => (j ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
      g.stroke();
      const [tLast, vLast] = s.points[s.points.length - 1] ?? [];
      if (tLast !== undefined) { // the newest value as a dot: seen even as the only point
        g.fillStyle = color;
        g.beginPath(); g.arc(x(tLast), y(vLast), 3, 0, 2 * Math.PI); g.fill();
      }
      const last = s.points.length ? s.points[s.points.length - 1][1] : null;
      const swatch = h("span", { className: "tag" }, "■");
      swatch.style.color = color;
      this.legend.append(swatch, ` ${s.name}${last === null ? "" : `: ${format(last)} ${this.unit}`}  `);
    });
  }
}
