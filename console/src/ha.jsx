// The node's side of its high-availability pair, from /api/node's `ha` (docs/management.md):
// its policy, role and state and, for replication, the peer, how the backup's copy stands
// (no backup, synchronizing, in sync) and, on the primary, how far the backup is behind.

const STATE_CLASS = {
  "in sync": "state-up",
  synchronizing: "state-connecting",
  "looking for its primary": "state-connecting",
  "no backup": "state-down",
};

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** The primary's lag: records not yet acknowledged by the backup, and bytes not yet sent. */
function Lag({ lag }) {
  const journals = Object.entries(lag || {});
  const tickets = journals.reduce((sum, [, l]) => sum + l.tickets, 0);
  const pending = journals.reduce((sum, [, l]) => sum + l.pending_bytes, 0);
  const detail = journals
    .map(([name, l]) => `${name}: ${l.tickets} record(s) not acknowledged, ${bytes(l.pending_bytes)} not sent`)
    .join("; ");
  return (
    <span class="ha-lag" title={detail} data-tickets={tickets} data-pending-bytes={pending}>
      lag {tickets} record(s), {bytes(pending)} waiting
    </span>
  );
}

/** One line of the header: "HA replication primary · live · backup HOST:PORT [in sync] · lag …". */
export function HaFacts({ ha }) {
  if (!ha) return null;
  const replication = ha.replication;
  const peer = ha.role === "primary" ? ha.backup : ha.primary;
  return (
    <p class="facts ha" data-replication={replication || ""}>
      HA <strong>{ha.policy}</strong> {ha.role} · {ha.state}
      {replication && replication !== "live" && (
        <>
          {" · "}
          {peer && (
            <>
              {ha.role === "primary" ? "backup" : "primary"} <code class="ha-peer">{peer}</code>
            </>
          )}
          <span class={`pill ha-replication ${STATE_CLASS[replication] || ""}`}>{replication}</span>
        </>
      )}
      {ha.lag && replication !== "no backup" && (
        <>
          {" · "}
          <Lag lag={ha.lag} />
        </>
      )}
    </p>
  );
}
