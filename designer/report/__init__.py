"""`designer report`: one data structure as an HTML page and a workbook."""
