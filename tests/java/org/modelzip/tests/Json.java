package org.modelzip.tests;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A JSON reader for the tests (the JDK has none): objects become
 * LinkedHashMap, arrays List, strings String, numbers their text (a String),
 * true and false Boolean, null {@link #NULL}. Throws
 * IllegalArgumentException at the first character it cannot read.
 */
final class Json {
  /** JSON's null (a map cannot hold Java's null apart from a missing key). */
  static final Object NULL = new Object() {
    @Override
    public String toString() {
      return "null";
    }
  };

  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  static Object parse(String text) {
    Json reader = new Json(text);
    Object value = reader.value();
    reader.space();
    if (reader.at != text.length()) {
      throw reader.error("text after the value");
    }
    return value;
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException(what + " at offset " + at + " of " + text);
  }

  private void space() {
    while (at < text.length() && " \t\r\n".indexOf(text.charAt(at)) >= 0) {
      at++;
    }
  }

  private void expect(char c) {
    space();
    if (at >= text.length() || text.charAt(at) != c) {
      throw error("expected '" + c + "'");
    }
    at++;
  }

  private boolean next(char c) {
    space();
    if (at < text.length() && text.charAt(at) == c) {
      at++;
      return true;
    }
    return false;
  }

  private Object value() {
    space();
    if (at >= text.length()) {
      throw error("expected a value");
    }
    char c = text.charAt(at);
    if (c == '{') {
      at++;
      Map<String, Object> out = new LinkedHashMap<>();
      if (!next('}')) {
        do {
          space();
          String key = string();
          expect(':');
          out.put(key, value());
        } while (next(','));
        expect('}');
      }
      return out;
    }
    if (c == '[') {
      at++;
      List<Object> out = new ArrayList<>();
      if (!next(']')) {
        do {
          out.add(value());
        } while (next(','));
        expect(']');
      }
      return out;
    }
    if (c == '"') {
      return string();
    }
    for (String word : new String[] {"true", "false", "null"}) {
      if (text.startsWith(word, at)) {
        at += word.length();
        return word.equals("null") ? NULL : Boolean.valueOf(word);
      }
    }
    int start = at;
    while (at < text.length() && "+-.eE0123456789".indexOf(text.charAt(at)) >= 0) {
      at++;
    }
    if (start == at) {
      throw error("expected a value");
    }
    return text.substring(start, at);
  }

  private String string() {
    if (at >= text.length() || text.charAt(at) != '"') {
      throw error("expected a string");
    }
    at++;
    StringBuilder out = new StringBuilder();
    while (true) {
      if (at >= text.length()) {
        throw error("unterminated string");
      }
      char c = text.charAt(at++);
      if (c == '"') {
        return out.toString();
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) {
        throw error("unterminated escape");
      }
      char e = text.charAt(at++);
      switch (e) {
        case '"', '\\', '/' -> out.append(e);
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          if (at + 4 > text.length()) {
            throw error("short \\u escape");
          }
          out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          at += 4;
        }
        default -> throw error("unknown escape \\" + e);
      }
    }
  }
}
