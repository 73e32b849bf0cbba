// The chart component: a plotly figure drawn once, then updated in place (Plotly.react). After shared.js.
export default function ({ parentElement, data, setTriggerValue }) {
  const plot = ownElement(parentElement, "relu-studio-chart");
  plot.reluSetTrigger = setTriggerValue;  // the latest mount's, for the click handler bound once
  if (plot.reluPayload !== data) {  // every rerun sends every chart again; most did not change
    plot.reluPayload = data;
    const payload = JSON.parse(data);
    plot.reluConfig = payload.config;
    plot.reluClickable = payload.clickable;
    plot.reluUnfollow = follow(plot, payload, { id: payload.view, figure: payload }, (view) => draw(plot, view));
  }
  const unfollow = plot.reluUnfollow;
  return () => {
    unfollow();
    setTimeout(() => plot.isConnected || loadPlotly().then((Plotly) => Plotly.purge(plot)).catch(() => {}), 0);
  };
}

function draw(plot, view) {
  const figure = view.figure || JSON.parse(view.body);
  // a fixed height: with "responsive" and no height of its own plotly measures the empty element (0 px) and
  // flips between 0 and its default on alternate updates
  plot.style.height = `${figure.layout.height || 450}px`;
  return loadPlotly().then((Plotly) => {
    Plotly.react(plot, figure.data, figure.layout, plot.reluConfig);
    if (plot.reluClickable && !plot.reluClickBound) {
      plot.reluClickBound = true;
      plot.on("plotly_click", (event) => {
        const point = event.points.find((p) => p.customdata != null) ?? event.points[0];
        plot.reluSetTrigger("click", { x: point.x, y: point.y, customdata: point.customdata ?? null });
      });
    }
    return true;
  }).catch((error) => {
    plot.textContent = error.message;
    return false;
  });
}
