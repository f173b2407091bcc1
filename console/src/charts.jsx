// The live charts (uPlot), from the History of /api/stats snapshots: per charted queue its
// depth, messages added per second and acknowledged per second; per cluster link (this
// node's bridge to another node) the messages it forwards per second and the backlog in its
// store-and-forward queue, so load this node passes on to other nodes shows too. One series
// per queue or link, in the same colour on every chart; a chart is made again only when its
// set of series changes. Each chart carries its highest value (data-peak) for tests.
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";

const COLOURS = ["#1565c0", "#2e7d32", "#c62828", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#ad1457"];

export const colour = (i) => COLOURS[i % COLOURS.length];

function Chart({ title, names, data }) {
  const box = useRef(null);
  const plot = useRef(null);
  const key = names.join("\u0000");

  useEffect(() => {
    const width = Math.max(280, box.current.clientWidth || 360);
    const opts = {
      width,
      height: 180,
      title,
      legend: { live: false },
      scales: {
        // At least half a minute's span (uPlot spans years around a single point).
        x: { time: true, range: (u, min, max) => [Math.min(min, max - 30), max] },
        y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] },
      },
      axes: [{}, { size: 56 }],
      series: [{}, ...names.map((n, i) => ({ label: n, stroke: colour(i), width: 2, spanGaps: false }))],
    };
    plot.current = new uPlot(opts, data, box.current);
    const resize = new ResizeObserver(() => {
      const w = box.current && box.current.clientWidth;
      if (w && plot.current && Math.abs(w - plot.current.width) > 4)
        plot.current.setSize({ width: w, height: 180 });
    });
    resize.observe(box.current);
    return () => {
      resize.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [key, title]);

  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  }, [data]);

  const values = data.slice(1).flat().filter((v) => v != null);
  return (
    <div
      class="chart"
      ref={box}
      role="img"
      aria-label={`${title}: ${names.join(", ")}`}
      data-title={title}
      data-peak={values.length ? Math.max(...values) : ""}
    />
  );
}

/** The queue charts; `names`: the charted queues. */
export function Charts({ history, names, version }) {
  if (!names.length || history.times.length === 0) {
    return <p class="empty">No queue charted yet: tick a queue's “Chart” box in the table.</p>;
  }
  const series = names.map((n) => history.queues.get(n));
  const empty = history.times.map(() => null);
  const pick = (f) => [history.times.slice(), ...series.map((s) => (s ? f(s) : empty))];
  return (
    <div class="charts" data-version={version}>
      <Chart title="Messages (depth)" names={names} data={pick((s) => s.messages.slice())} />
      <Chart title="Added per second" names={names} data={pick((s) => history.rate(s.added))} />
      <Chart
        title="Acknowledged per second"
        names={names}
        data={pick((s) => history.rate(s.acknowledged))}
      />
    </div>
  );
}

/** The cluster links' charts; `links`: [{key (History.links), label}], one per link. */
export function LinkCharts({ history, links, version }) {
  if (!links.length || history.times.length === 0) return null;
  const names = links.map((l) => l.label);
  const series = links.map((l) => history.links.get(l.key));
  const empty = history.times.map(() => null);
  const pick = (f) => [history.times.slice(), ...series.map((s) => (s ? f(s) : empty))];
  return (
    <div class="charts links" data-version={version}>
      <Chart
        title="Forwarded to other nodes per second"
        names={names}
        data={pick((s) => history.rate(s.forwarded))}
      />
      <Chart
        title="Store-and-forward backlog (messages)"
        names={names}
        data={pick((s) => s.backlog.slice())}
      />
    </div>
  );
}
