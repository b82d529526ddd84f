"""The model manager's side panel text: everything known about the selected installed or catalog model."""

from __future__ import annotations

from html import escape

from app.core.units import human_size
from app.service.events import CatalogRow, ModelRow
from app.ui.state.fit_verdict import verdict_tooltip

# Details of a model's files, in the order shown, with their labels.
_DETAILS = (("format", "Format"), ("architecture", "Architecture"), ("parameters_label", "Parameters"),
            ("quantization", "Quantization"), ("file_size", "File size"), ("layers", "Layers"),
            ("context_length", "Native context"), ("chat_template", "Chat template"), ("license", "Licence"))
# Where a template missing from the file can be set: the Settings tab beside Details.
NO_TEMPLATE = "none in the file (set one on the Settings tab, beside this one)"


def details_html(row: ModelRow) -> str:
    """Everything known about an installed model, and its fit with the numbers behind it (its name is
    the side panel's heading, over both tabs)."""
    model = row.model
    lines: list[str] = []
    if row.problem:
        lines.append(f"<p><b>{escape(row.problem)}</b></p>")
    cells = []
    for key, label in _DETAILS:
        value = row.details.get(key)
        if key == "parameters_label" and not value and row.details.get("parameters"):
            value = f"{row.details['parameters']:,}"
        if value is None or value == "":
            continue
        if key == "file_size":
            value = human_size(int(value))
        elif key == "chat_template":
            value = "in the file" if value else NO_TEMPLATE
        elif key == "context_length":
            value = f"{value:,} tokens"
        cells.append((label, str(value)))
    where = "kept where you keep it" if model.referenced else "in Kestrel's models folder"
    cells += [("File", f"{model.path} ({where})"), ("Source", model.source)]
    if row.details.get("projector"):
        cells.append(("Reads images", f"yes, with {row.details['projector']} (its vision projector)"))
    lines.append(_table(cells))
    if row.details.get("projector_missing"):
        lines.append(f"<p>{escape(str(row.details['projector_missing']))}</p>")
    if row.fit is not None:
        lines.append(_fit(verdict_tooltip(row.fit)))
    return "".join(lines)


def catalog_html(row: CatalogRow) -> str:
    """A catalog model: what it is for, where it comes from, its facts and its fit in numbers."""
    entry = row.entry
    size = human_size(entry.size) if entry.size else "told by the server when the download starts"
    cells = [("Publisher", entry.publisher), ("Parameters", entry.parameters), ("Quantization", entry.quantization),
             ("Format", entry.format.upper()), ("Download size", size),
             ("Native context", f"{entry.context_length:,} tokens"), ("Licence", entry.license),
             ("From", f"huggingface.co/{entry.repo}")]
    if entry.projector is not None:
        projector = human_size(entry.projector.size) if entry.projector.size else "size from the server"
        cells.append(("Reads images", f"yes, with {entry.projector.path} ({projector}, downloaded with it; "
                                      "its vision projector)"))
    if row.installed_id:
        cells.append(("Installed", f"yes, as {row.installed_id}"))
    return (f"<h3>{escape(entry.name)}</h3><p>{escape(entry.description)}</p>" + _table(cells)
            + _fit(verdict_tooltip(row.fit)))


def _table(cells: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><td>{escape(label)}:&nbsp;</td><td>{escape(value)}</td></tr>"
                               for label, value in cells) + "</table>"


def _fit(numbers: str) -> str:
    return "<p><b>Will it fit?</b> " + escape(numbers).replace("\n", "<br>") + "</p>"
