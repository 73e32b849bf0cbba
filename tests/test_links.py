"""A shared link keeps its meaning (issue 43), at the AppTest level: the widgets the browser has not mounted
(Explore's "More settings" popover before it is first opened) get their values with every run
(``session.resend_unreported``), and Explore's guaranteed-risk link survives a λ move. The real browser's
version: ``tests/test_links_browser.py``."""

from __future__ import annotations

from apptest_pages import EXPLORE, app
from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.testing.v1 import AppTest

TIMEOUT = 300  # the first default run trains a small CNN; later runs read the cache


def _reported_script():
    import streamlit as st

    from studio import session

    st.session_state.setdefault("reported", []).append(session.browser_reported("kind"))
    st.radio("kind", ["first", "second"], key="kind")


def test_browser_reported_tells_the_widgets_the_browser_sent():
    """False before the widget was ever drawn (nothing sent it), True once AppTest (as a browser) sends its
    state: if Streamlit's internals moved, ``browser_reported`` would say False for ever and this fails."""
    at = AppTest.from_function(_reported_script, default_timeout=TIMEOUT).run()
    at.run()
    assert at.session_state["reported"] == [False, True]


def _popover_script():
    import streamlit as st

    from studio import session

    st.session_state.setdefault("kind", "second")  # a link's value
    if st.session_state.get("resend", True):
        session.resend_unreported(["kind"])
    st.radio("kind", ["first", "second"], key="kind")


def _rerun_unmounted(at: AppTest) -> AppTest:
    """A rerun whose browser sends no widget state: as one whose popover was never opened sends none of its
    widgets (AppTest otherwise sends every widget of its tree)."""
    return at._run(widget_state=WidgetStates())


def test_a_widget_the_browser_never_mounted_carries_its_value():
    """A widget drawn again on a run that the browser sent no value of it with (a popover's widget on a fragment
    rerun before the popover was opened) must still send its value (``set_value``): else the browser, mounting
    it later, shows its first option and sends that back."""
    at = AppTest.from_function(_popover_script, default_timeout=TIMEOUT).run()
    radio = _rerun_unmounted(at).radio(key="kind")
    assert radio.value == "second" and radio.proto.set_value
    at.run()  # reported by the browser: left alone, so that a move of it on its way is not undone
    assert at.radio(key="kind").value == "second" and not at.radio(key="kind").proto.set_value


def test_without_the_resend_the_browser_gets_no_value():
    """The same script without ``resend_unreported``: the proto carries no value (the defect it fixes)."""
    at = AppTest.from_function(_popover_script, default_timeout=TIMEOUT)
    at.session_state["resend"] = False
    at.run()
    assert not _rerun_unmounted(at).radio(key="kind").proto.set_value


def test_guaranteed_risk_link_survives_a_lambda_move():
    """``/Explore?lam=0.6&...&risk=0.1&delta=0.05``: the guaranteed-risk view, kept in the URL and the controls
    through a λ move."""
    at = app(EXPLORE, TIMEOUT)
    at.query_params.update({"lam": "0.6", "T": "1", "eps": "0", "tune": "0.5", "seed": "0"})
    at.query_params.update({"risk": "0.1", "delta": "0.05"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.slider(key="ex_lam").set_value(0.61).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="ex_op_kind").value == "guaranteed risk"
    assert at.select_slider(key="ex_op_risk").value == 0.1 and at.select_slider(key="ex_op_delta").value == 0.05
    assert at.multiselect(key="ex_detectors").value == ["relu", "doctor"]
    params = at.query_params
    assert (params["lam"], params["risk"], params["delta"]) == ("0.61", "0.1", "0.05")
