// Everything the components rely on in Streamlit's page markup, read from Streamlit 1.67.0's frontend; nothing
// else in studio/frontend names Streamlit's markup. tests/test_frontend_markup.py fails when one of these stops
// matching a served Explore page. The one such rule on the Python side is the class of a keyed widget's element,
// "st-key-" + its key (studio.live_chart.widget_class), by which the components find the slider they follow.
const STREAMLIT = {
  // the value a slider shows: its thumb's label
  sliderThumbValue: '[data-testid="stSliderThumbValue"]',
  // an element container of an earlier run, left on the page while a rerun is under way
  stale: '[data-stale="true"]',
  // set on the slider's input (role=slider) on every render of the slider, the user's moves included
  sliderValueAttribute: "aria-valuetext",
  // what a user changes settings with, in the page or the sidebar (the elements Streamlit's widgets are made of)
  controls: "input, textarea, select, button, label, [role=slider], [role=checkbox], [role=radio], "
    + "[role=switch], [role=combobox], [role=option], [role=listbox]",
  // tabs, expanders (a details element's summary) and popovers' buttons: they only show or hide
  showOrHide: '[role=tab], summary, [data-testid="stPopoverButton"]',
};
