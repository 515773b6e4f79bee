"""Repeated looks: group-sequential designs (``stats.sequential``) and planned extensions (``stats.extensions``,
``runner.extend``), each look at its spending boundary; sizes planned at look 1, margins refused with looks."""
