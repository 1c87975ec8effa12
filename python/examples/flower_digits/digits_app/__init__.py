"""A Flower app: softmax regression on scikit-learn's digits, trained with SignDS
(fl_privacy.flower) or plain FedAvg, with Laplace-protected evaluation results."""
