// The HTML component: a table or a line of text that may follow a slider, and may poll the server. After
// shared.js.
export default function ({ parentElement, data, setTriggerValue }) {
  const box = ownElement(parentElement, "relu-studio-html");
  if (box.reluPayload !== data) {
    box.reluPayload = data;
    const payload = JSON.parse(data);
    box.reluPollMs = payload.poll_ms || 0;
    box.reluUnfollow = follow(box, payload, { id: payload.view, body: payload.html }, (view) => {
      box.innerHTML = view.body;
      return true;
    });
  }
  // while the server waits on something, ask it again (a rerun of this element's fragment only) in a moment
  clearTimeout(box.reluPoll);
  if (box.reluPollMs) box.reluPoll = setTimeout(() => setTriggerValue("poll", Date.now()), box.reluPollMs);
  const unfollow = box.reluUnfollow;
  return () => {
    unfollow();
    setTimeout(() => box.isConnected || clearTimeout(box.reluPoll), 0);
  };
}
