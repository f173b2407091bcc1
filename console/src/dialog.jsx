// The confirmation every operation goes through: a modal <dialog> (the browser gives it
// focus handling and Escape to cancel) saying what will happen, with the operation's
// fields (a target queue, a force flag) when it has some.
import { useEffect, useRef, useState } from "preact/hooks";

/**
 * `request`: {title, text, confirm (button label), danger, fields: [{name, label, type:
 * "select"|"checkbox", options}], run(values) -> Promise}, or null when closed.
 */
export function ConfirmDialog({ request, onDone }) {
  const ref = useRef(null);
  const [values, setValues] = useState({});
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    const dialog = ref.current;
    if (request && !dialog.open) {
      const initial = {};
      for (const f of request.fields || [])
        initial[f.name] = f.type === "checkbox" ? false : (f.options || [])[0] || "";
      setValues(initial);
      setBusy(false);
      dialog.showModal();
    } else if (!request && dialog.open) dialog.close();
  }, [request]);

  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    await onDone(request, values);
  };

  return (
    <dialog
      ref={ref}
      class="confirm"
      aria-labelledby="confirm-title"
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onDone(null);
      }}
    >
      {request && (
        <form onSubmit={submit}>
          <h2 id="confirm-title">{request.title}</h2>
          <p>{request.text}</p>
          {(request.fields || []).map((f) => (
            <label key={f.name} class={f.type === "checkbox" ? "check" : ""}>
              {f.type === "checkbox" ? (
                <input
                  type="checkbox"
                  name={f.name}
                  checked={values[f.name]}
                  onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.checked })}
                />
              ) : null}
              {f.label}
              {f.type === "select" ? (
                <select
                  name={f.name}
                  value={values[f.name]}
                  onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}
                >
                  {f.options.map((o) => (
                    <option key={o} value={o}>
                      {o}
                    </option>
                  ))}
                </select>
              ) : null}
            </label>
          ))}
          <div class="buttons">
            <button type="button" class="cancel" disabled={busy} onClick={() => onDone(null)}>
              Cancel
            </button>
            <button type="submit" class={`confirm ${request.danger ? "danger" : ""}`} disabled={busy}>
              {request.confirm}
            </button>
          </div>
        </form>
      )}
    </dialog>
  );
}
