"""Document processing of the coded fixture task: questions upper-cased (visible in the prompts)."""


def process_docs(dataset):
    return dataset.map(lambda doc: {"question": doc["question"].upper()})
