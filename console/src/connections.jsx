// The client connections of this node (GET /api/connections), each closable.
import { api } from "./api.js";

const fmt = (n) => (n == null ? "–" : Number(n).toLocaleString("en"));

export function ConnectionsTable({ connections, ask }) {
  if (!connections) return null;
  if (!connections.length) return <p class="empty">No client connection.</p>;
  return (
    <div class="scroll">
      <table class="connections">
        <caption class="visually-hidden">Client connections of this node</caption>
        <thead>
          <tr>
            <th scope="col">ID</th>
            <th scope="col">Remote address</th>
            <th scope="col">Protocol</th>
            <th scope="col">User</th>
            <th scope="col">Created</th>
            <th scope="col" class="num">Sessions</th>
            <th scope="col" class="num">Consumers</th>
            <th scope="col" class="num">Frames in</th>
            <th scope="col" class="num">Frames out</th>
            <th scope="col"><span class="visually-hidden">Operations</span></th>
          </tr>
        </thead>
        <tbody>
          {connections.map((c) => (
            <tr key={c.id} data-connection={c.id}>
              <th scope="row"><code>{c.id}</code></th>
              <td>{c.remote_address}</td>
              <td>{c.protocol} {c.version}</td>
              <td>{c.user || "–"}</td>
              <td>{c.created ? new Date(typeof c.created === "number" ? c.created * 1000 : c.created).toLocaleTimeString() : "–"}</td>
              <td class="num">{fmt(c.sessions)}</td>
              <td class="num">{fmt(c.consumers)}</td>
              <td class="num">{fmt(c.frames_in)}</td>
              <td class="num">{fmt(c.frames_out)}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Close connection ${c.id}`}
                  onClick={() =>
                    ask({
                      title: "Close connection",
                      text: `Close the connection ${c.id} from ${c.remote_address}? Its client is disconnected.`,
                      confirm: "Close connection",
                      danger: true,
                      run: async () => (await api.closeConnection(c.id), `connection ${c.id} closed`),
                    })
                  }
                >
                  Close
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
