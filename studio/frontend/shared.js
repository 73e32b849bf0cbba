// What both components share: plotly.js, their own element, and the following of a slider (streamlit_markup.js
// comes first: STREAMLIT).
function loadPlotly() {
  // one script element per page; resolves to the plotly.js of app/static, whoever else set window.Plotly
  if (!window.__reluStudioPlotly) {
    window.__reluStudioPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = new URL("app/static/plotly.min.js", document.baseURI).href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error("Rel-U Studio: app/static/plotly.min.js could not be loaded"));
      document.head.appendChild(script);
    });
  }
  return window.__reluStudioPlotly;
}

// The component's element in ``parent``, made on the first mount and kept across reruns.
function ownElement(parent, className) {
  let element = parent.querySelector(`.${className}`);
  if (!element) {
    element = document.createElement("div");
    element.className = className;
    parent.appendChild(element);
  }
  return element;
}

// The value a keyed st.slider shows (its thumb's label), as the server names views. A rerun may leave an old copy
// of the slider on the page for a moment: the last copy not marked stale is the live one.
function sliderValue(follow) {
  const labels = [...document.querySelectorAll(`.${follow.slider} ${STREAMLIT.sliderThumbValue}`)];
  const live = labels.filter((label) => !label.closest(STREAMLIT.stale));
  const label = (live.length ? live : labels).at(-1);
  return label ? Number(label.textContent).toFixed(follow.decimals) : null;
}

// An interaction with a control (in the page or the sidebar) may make the neighbours' views wrong. Tabs and
// expanders only show or hide, and a chart's zoom or hover changes no setting.
const NOT_SETTINGS = `.js-plotly-plot, ${STREAMLIT.showOrHide}`;

// One registry per page: the elements following a slider, and whether following is on.
function followers() {
  if (window.__reluStudioFollow) return window.__reluStudioFollow;
  const registry = { targets: new Set(), blockedAt: null, lastRun: -1 };
  // Another control touched: its rerun, or one already under way (which started before the touch and may
  // still bring views of the old settings), come first. Following resumes with the run after those two.
  const interaction = (event) => {
    const element = event.target instanceof Element ? event.target : null;
    if (!element || element.closest(NOT_SETTINGS) || !element.closest(STREAMLIT.controls)) return;
    for (const target of registry.targets) if (target.follow && element.closest(`.${target.follow.slider}`)) return;
    registry.blockedAt = registry.lastRun;
    for (const target of registry.targets) target.seen.clear();  // views of the old settings
  };
  for (const type of ["pointerdown", "keydown", "change"]) document.addEventListener(type, interaction, true);
  // the slider's input is marked on every render of the slider, the user's moves included
  new MutationObserver((records) => {
    if (registry.blockedAt !== null) return;
    for (const target of registry.targets) {
      if (target.follow && records.some((r) => r.target.closest(`.${target.follow.slider}`))) target.update(false);
    }
  }).observe(document.body, { subtree: true, attributes: true, attributeFilter: [STREAMLIT.sliderValueAttribute] });
  window.__reluStudioFollow = registry;
  return registry;
}

// The views each element keeps of the values its slider had since following last resumed (the server's own and
// the neighbours'), so that a value already shown is shown again at once: back and forth between two values the
// slider returns to one whose view is no longer among the latest answer's neighbours.
const SEEN_MAX = 24;

function remember(target, value, view) {
  target.seen.delete(value);
  target.seen.set(value, view);
  if (target.seen.size > SEEN_MAX) target.seen.delete(target.seen.keys().next().value);
}

// Registers ``element`` (drawn by ``show(view)``, which returns false when drawing failed) for this render's
// payload and shows the view its slider's value asks for, else the server's own. Returns the cleanup.
function follow(element, payload, current, show) {
  const registry = followers();
  let target = element.reluFollowTarget;
  if (!target) {
    target = element.reluFollowTarget = { shown: null, seen: new Map() };
    // rendered: the server's answer, its own view unless the slider has moved on to another value's (this
    // answer's neighbours', or one kept from an earlier answer); a value without a view keeps what is shown
    // until the server answers for it
    target.update = (rendered) => {
      const follow = target.follow, value = follow && sliderValue(follow);
      const ahead = value && value !== follow.current;  // the slider left the value this answer is for
      const own = !ahead || (rendered && target.shown === null) ? target.current : null;
      const kept = registry.blockedAt === null && ahead ? follow.views[value] || target.seen.get(value) : null;
      const view = kept || own;
      if (view && view.id !== target.shown) {
        target.shown = view.id;
        Promise.resolve(show(view)).then((drawn) => { if (drawn === false) target.shown = null; });
      }
    };
  }
  target.follow = payload.follow || null;
  target.current = current;
  if (!target.follow) target.seen.clear();
  if (target.follow) {
    if (target.follow.run < registry.lastRun) registry.blockedAt = null;  // a new session (a restarted server)
    registry.lastRun = target.follow.run;
    if (registry.blockedAt !== null && target.follow.run >= registry.blockedAt + 2) registry.blockedAt = null;
    if (registry.blockedAt === null) {  // an answer for the settings shown: its views may be shown again later
      remember(target, target.follow.current, current);
      for (const [value, view] of Object.entries(target.follow.views)) remember(target, value, view);
    }
  }
  registry.targets.add(target);
  target.update(true);
  // called when Streamlit unmounts the element; an element still on the page is being updated, not removed
  return () => setTimeout(() => element.isConnected || registry.targets.delete(target), 0);
}
