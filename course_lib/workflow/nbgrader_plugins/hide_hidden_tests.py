"""`HideHiddenTestTracebacks`, in generate_feedback: a failing hidden test cell keeps only its error's name and
message. A traceback would print the line that failed, which is hidden test text."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["HideHiddenTestTracebacks"]


class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """Reduce error outputs of hidden-test cells to `Name: message`."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
