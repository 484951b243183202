"""Issue 46: a starting worker's 404 (Jetty's whole HTML page) was printed into
every progress line; an error reply is now one line."""
from mirrorstack.connect.api import reply_text

JETTY_404 = b"""<html>
<head>
<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>
<title>Error 404 Not Found</title>
</head>
<body>
<h2>HTTP ERROR 404 Not Found</h2>
<table>
<tr><th>URI:</th><td>/connector-plugins</td></tr>
<tr><th>STATUS:</th><td>404</td></tr>
<tr><th>MESSAGE:</th><td>Not Found</td></tr>
</table>
</body>
</html>
"""


def test_an_html_page_becomes_its_title():
    assert reply_text(JETTY_404) == "an HTML page (Error 404 Not Found)"


def test_connects_json_error_becomes_its_message():
    body = b'{"error_code":409,"message":"Cannot complete request momentarily due to stale configuration\\n(typically caused by a concurrent config change)"}'
    assert reply_text(body) == ("Cannot complete request momentarily due to stale configuration (typically caused "
                                "by a concurrent config change)")


def test_other_text_is_one_line_and_bounded():
    assert reply_text(b"line one\nline two", limit=12) == "line one lin"
    assert "\n" not in reply_text(b"[1,\n2]")
