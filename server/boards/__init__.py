"""Boards: build a board, its statistics, plots and exports, from declared models."""
