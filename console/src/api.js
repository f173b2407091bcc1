// The node's JSON management API (docs/management.md), same origin: the browser sends the
// HTTP Basic credentials it was given for this node (it prompts on the server's 401).

/** An error the API answered with ({"error": ...}), or a failed request. */
export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function request(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    // From the origin, not relative to the page: a page opened as http://user:pass@host/...
    // would otherwise make URLs with credentials in them, which fetch refuses.
    response = await fetch(new URL(path, window.location.origin), init);
  } catch (e) {
    throw new ApiError(`${method} ${path}: no answer from the node (${e.message})`, 0);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const why = data && typeof data.error === "string" ? data.error : response.statusText;
    const hint =
      response.status === 401
        ? " (sign in: reload the page)"
        : response.status === 403
          ? " (this user lacks the manage permission)"
          : "";
    throw new ApiError(`${method} ${path}: ${response.status} ${why}${hint}`, response.status);
  }
  return data;
}

const q = (name) => encodeURIComponent(name);

export const api = {
  node: () => request("GET", "/api/node"),
  queues: () => request("GET", "/api/queues"),
  addresses: () => request("GET", "/api/addresses"),
  connections: () => request("GET", "/api/connections"),
  cluster: () => request("GET", "/api/cluster"),
  stats: () => request("GET", "/api/stats"),
  createQueue: (spec) => request("POST", "/api/queues", spec),
  deleteQueue: (name, force) =>
    request("DELETE", `/api/queues/${q(name)}${force ? "?force=true" : ""}`),
  purge: (name) => request("POST", `/api/queues/${q(name)}/purge`),
  pause: (name) => request("POST", `/api/queues/${q(name)}/pause`),
  resume: (name) => request("POST", `/api/queues/${q(name)}/resume`),
  move: (name, to) => request("POST", `/api/queues/${q(name)}/move`, { to }),
  browse: (name, limit) => request("GET", `/api/queues/${q(name)}/messages?limit=${limit}`),
  closeConnection: (id) => request("DELETE", `/api/connections/${q(id)}`),
  scaleDown: () => request("POST", "/api/cluster/scale-down"),
};
