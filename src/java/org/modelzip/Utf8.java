package org.modelzip;

import java.nio.charset.StandardCharsets;

/**
 * Strings as the UTF-8 bytes the library takes, refusing what UTF-8 cannot
 * hold. Apart from {@link Native} so that values (e.g. {@link MetadataUpdate})
 * are checked when they are made, without loading the JNI library.
 */
final class Utf8 {
  private Utf8() {}

  /**
   * The UTF-8 bytes of {@code text} (null stays null).
   *
   * @throws IllegalArgumentException if it holds an unpaired surrogate, which
   *     UTF-8 cannot encode ({@code getBytes} would silently turn it into '?',
   *     and a name, tag or path would name something else)
   */
  static byte[] encode(String text) {
    if (text == null) {
      return null;
    }
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < text.length()
          && Character.isLowSurrogate(text.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        throw new IllegalArgumentException(String.format(
            "\"%s\" is not valid Unicode: unpaired surrogate U+%04X at index %d (UTF-8 cannot encode it)",
            text.replace(c, '\uFFFD'), (int) c, i));
      }
    }
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * {@code text} as the library's error messages show it: C0 control
   * characters, DEL and C1 control characters escaped (a carriage return as
   * backslash-r, ESC as backslash-x1b, U+0085 as backslash-u0085), everything
   * else unchanged (the C++ detail::printable).
   */
  static String printable(String text) {
    StringBuilder out = new StringBuilder(text.length());
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c >= 0x80 && c < 0xA0) {
        out.append(String.format("\\u%04x", (int) c));
      } else if (c >= 0x20 && c != 0x7F) {
        out.append(c);
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == '\t') {
        out.append("\\t");
      } else if (c == '\r') {
        out.append("\\r");
      } else {
        out.append(String.format("\\x%02x", (int) c));
      }
    }
    return out.toString();
  }
}
