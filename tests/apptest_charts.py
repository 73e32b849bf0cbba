"""The charts a page drew in AppTest (``studio.live_chart``'s component), in page order, as the browser gets
them: ``{"data", "layout", "config", "clickable"}``."""

from __future__ import annotations

import json


def charts(at) -> list[dict]:
    return [
        json.loads(json.loads(element.proto.json))
        for element in at.get("bidi_component")
        if element.proto.component_name == "relu_studio_chart"
    ]
