package org.modelzip;

/** A word and its cosine similarity to a query. An immutable value. */
public final class WordSimilarity {
  private final String word;
  private final float similarity;

  /** Built by the native glue (the word UTF-8). */
  WordSimilarity(byte[] word, float similarity) {
    this.word = Native.string(word);
    this.similarity = similarity;
  }

  public String word() {
    return word;
  }

  /** Cosine similarity, in [-1, 1]. */
  public float similarity() {
    return similarity;
  }

  @Override
  public String toString() {
    return word + " " + similarity;
  }
}
